// Megatron-LM's optimizer and scheduler flags end to end
// (args/optimizer_args.h, train/scheduler_resume.h): --optimizer sgd at DP2
// with and without the distributed optimizer gives one rank's losses;
// --decoupled-lr changes the run only through the embedding and output layer
// (equal to --lr: the same losses; otherwise other losses) and PP2 and TP2
// give one rank's losses with it; the weight-decay and resume flags' misuses
// are refused in one line, naming the flag; on resume with another --lr,
// neither flag trains on the command line's and says so (Megatron-LM
// asserts), --use-checkpoint-opt_param-scheduler trains on
// the checkpoint's schedule (the uninterrupted losses) and
// --override-opt_param-scheduler on the command line's.
#include <string>

#include "bad_input_util.h"
#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace optimizer_flags_test {

std::string model_flags(const std::string& extra) {
  return " --num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 1 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1"
         " --train-iters 6 --eval-interval 3 --eval-iters 1" + extra;
}

TEST(OptimizerFlags, SgdAtDp2WithAndWithoutDistributedOptimizerMatchesOneRank) {
  expect_layouts_match_one_rank(
      model_flags(" --optimizer sgd --sgd-momentum 0.8 --lr 0.05 --min-lr 0.005"),
      {{"dp2", 2, ""}, {"dp2_zero1", 2, " --use-distributed-optimizer"}}, 1e-5, {"loss"},
      "--optimizer sgd");
}

TEST(OptimizerFlags, DecoupledLrAtPp2AndTp2MatchesOneRank) {
  expect_layouts_match_one_rank(
      model_flags(" --decoupled-lr 1e-2 --decoupled-min-lr 1e-3"),
      {{"pp2", 2, " --pipeline-model-parallel-size 2"},
       {"tp2", 2, " --tensor-model-parallel-size 2 --sequence-parallel"}},
      1e-5, {"loss"}, "--decoupled-lr");
}

// Runs the tiny model with `extra`; its --log-json losses.
JsonLogLines losses(const TempDir& dir, const std::string& data, const std::string& tag,
                    const std::string& extra) {
  const std::string log = dir.file(tag + ".json");
  const RunResult r = run(megatron() + " train" + data + model_flags(extra) +
                          vocab_padding("") + " --log-json " + log);
  EXPECT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
  return read_log_json(log);
}

TEST(OptimizerFlags, DecoupledLrActsOnlyThroughItsParameters) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const JsonLogLines plain = losses(dir, data, "plain", "");
  // The same ends as --lr / --min-lr: the same run, bit for bit.
  expect_same_losses(plain,
                     losses(dir, data, "same", " --decoupled-lr 3e-3 --decoupled-min-lr 3e-4"),
                     "decoupled = lr", 0);
  // Other ends: the first step is the same (same weights), later ones are not.
  const JsonLogLines other = losses(dir, data, "other", " --decoupled-lr 3e-2");
  ASSERT_EQ(other.train.size(), 6u);
  EXPECT_EQ(other.train.at(1).at("loss"), plain.train.at(1).at("loss"));
  EXPECT_NE(other.train.at(3).at("loss"), plain.train.at(3).at("loss"));
  EXPECT_EQ(other.train.at(3).at("lr"), plain.train.at(3).at("lr"));  // the logged lr is --lr's
}

TEST(OptimizerFlags, WeightDecayScheduleChangesTheRunAndConstantIsWeightDecay) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const JsonLogLines plain = losses(dir, data, "plain", "");
  // linear from 0.1 to 0.1 is the constant --weight-decay 0.1.
  expect_same_losses(plain, losses(dir, data, "flat", " --weight-decay-incr-style linear "
                                   "--start-weight-decay 0.1 --end-weight-decay 0.1"),
                     "flat schedule", 0);
  const JsonLogLines rising = losses(dir, data, "rising", " --weight-decay-incr-style cosine "
                                     "--start-weight-decay 0 --end-weight-decay 0.5");
  ASSERT_EQ(rising.train.size(), 6u);
  EXPECT_NE(rising.train.at(3).at("loss"), plain.train.at(3).at("loss"));
}

class OptimizerFlagsBad : public BadInputFixture {};

TEST_F(OptimizerFlagsBad, MisusesAreRefusedByName) {
  const BadInputCase cases[] = {
      {"muon", train(" --optimizer muon"), "--optimizer muon is not built here"},
      {"momentum", train(" --optimizer sgd --sgd-momentum -1"), "--sgd-momentum -1"},
      {"decoupled", train(" --decoupled-lr -1"), "--decoupled-lr -1"},
      {"start without style", train(" --start-weight-decay 0.1"),
       "--start-weight-decay 0.1 with --weight-decay-incr-style constant"},
      {"style without end", train(" --weight-decay-incr-style linear --start-weight-decay 0"),
       "--end-weight-decay is missing"},
      {"decreasing", train(" --weight-decay-incr-style linear --start-weight-decay 0.2 "
                           "--end-weight-decay 0.1"),
       "--end-weight-decay 0.1 must be >= --start-weight-decay 0.2"},
      {"bad style", train(" --weight-decay-incr-style exponential --start-weight-decay 0 "
                          "--end-weight-decay 0.1"),
       "--weight-decay-incr-style 'exponential'"},
      {"both resume flags", train(" --use-checkpoint-opt_param-scheduler "
                                  "--override-opt_param-scheduler"),
       "both override and use-checkpoint are set"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

TEST(OptimizerFlags, ResumeWithAnotherLrFollowsMegatronsRule) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(200));
  const std::string constant = " --lr-decay-style constant --lr-warmup-iters 0";
  const JsonLogLines whole = losses(dir, data, "whole", constant);
  const std::string base = megatron() + " train" + data + model_flags(constant) + vocab_padding("");
  const RunResult save = run(base + " --exit-interval 3 --save " + dir.file("c"));
  ASSERT_EQ(save.exit_code, 0) << save.output;
  const std::string resume = megatron() + " train" + data + model_flags(constant) +
                             vocab_padding("") + " --lr 1e-3 --load " + dir.file("c");
  // Neither flag: the command line's values, said once with both flags
  // (Megatron-LM asserts instead; extending --train-iters needs this).
  const RunResult plain = run(resume + " --log-json " + dir.file("plain.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("note: this command line's schedule values are used: max_lr "
                              "0.003 (checkpoint) vs 0.001 (command line, --lr)"),
            std::string::npos)
      << plain.output;
  EXPECT_NE(plain.output.find("--use-checkpoint-opt_param-scheduler to keep"), std::string::npos);
  EXPECT_EQ(read_log_json(dir.file("plain.json")).train.at(4).at("lr").get<double>(), 1e-3);
  const RunResult kept = run(resume + " --use-checkpoint-opt_param-scheduler --log-json " +
                             dir.file("kept.json"));
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  const JsonLogLines k = read_log_json(dir.file("kept.json"));
  ASSERT_EQ(k.train.size(), 3u);
  for (int64_t it = 4; it <= 6; ++it) {
    EXPECT_EQ(k.train.at(it).at("lr").get<double>(), 3e-3);
    EXPECT_NEAR(k.train.at(it).at("loss").get<double>(),
                whole.train.at(it).at("loss").get<double>(), 1e-7);
  }
  const RunResult over = run(resume + " --override-opt-param-scheduler --log-json " +
                             dir.file("over.json"));
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_NE(over.output.find("--override-opt_param-scheduler: this command line's schedule values "
                             "are used: max_lr 0.003 (checkpoint) vs 0.001 (command line, --lr)"),
            std::string::npos)
      << over.output;
  const JsonLogLines o = read_log_json(dir.file("over.json"));
  ASSERT_EQ(o.train.size(), 3u);
  EXPECT_EQ(o.train.at(4).at("lr").get<double>(), 1e-3);
  EXPECT_NE(o.train.at(5).at("loss"), whole.train.at(5).at("loss"));
  // The optimizer state is Adam's: resuming it as SGD is refused by name.
  const RunResult sgd = run(resume + " --override-opt_param-scheduler --optimizer sgd");
  EXPECT_NE(sgd.exit_code, 0);
  EXPECT_NE(sgd.output.find("optimizer state is adam's"), std::string::npos) << sgd.output;
}

}  // namespace optimizer_flags_test
}  // namespace mt::test
