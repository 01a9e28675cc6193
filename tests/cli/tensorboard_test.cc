// `megatron train --tensorboard-dir`: the events files, decoded by the reader
// written from the format's specification (tests/tensorboard_reader.h), hold
// Megatron-LM's tags with the --log-json numbers of the same iterations; one
// file from the last rank of a pipeline; a resumed run adds a file that
// continues the series; a directory that cannot be written ends every rank
// with one line before training.
#include <cmath>
#include <set>

#include "cli_test_util.h"
#include "tensorboard_reader.h"

namespace mt::test {
namespace tensorboard_test {

class TensorBoardCli : public ::testing::Test {
 protected:
  void SetUp() override { data = prepare_data(dir, synthetic_corpus(120)); }
  std::string train(const std::string& extra) const {
    return megatron() + " train" + data + tiny_model_flags() + extra;
  }
  TempDir dir;
  std::string data;
};

// The one events file of `tb_dir`, decoded (fails the test unless exactly one).
TbSeries only_file(const std::string& tb_dir) {
  const std::vector<std::string> files = events_files(tb_dir);
  EXPECT_EQ(files.size(), 1u) << tb_dir;
  if (files.size() != 1) return {};
  const std::vector<TbEvent> events = read_events_file(files[0]);
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_EQ(events[0].file_version, "brain.Event:2");
  }
  return scalars_by_tag(events);
}

// `value` is the double `want` rounded to float.
void expect_float_of(float value, double want, const std::string& what) {
  EXPECT_EQ(value, float(want)) << what << ": " << value << " vs " << want;
}

// lm loss, learning-rate and grad-norm (and their "vs samples") equal the
// --log-json numbers of each iteration.
void expect_train_series_match(const TbSeries& s, const JsonLogLines& log, int64_t batch) {
  for (const auto& [it, j] : log.train) {
    const std::string at = " at iteration " + std::to_string(it);
    expect_float_of(s.at("lm loss").at(it), j.at("loss").get<double>(), "lm loss" + at);
    expect_float_of(s.at("learning-rate").at(it), j.at("lr").get<double>(), "learning-rate" + at);
    expect_float_of(s.at("grad-norm").at(it), j.at("grad_norm").get<double>(), "grad-norm" + at);
    expect_float_of(s.at("batch-size").at(it), double(batch), "batch-size" + at);
    const int64_t samples = j.at("consumed_samples").get<int64_t>();
    expect_float_of(s.at("lm loss vs samples").at(samples), j.at("loss").get<double>(),
                    "lm loss vs samples" + at);
  }
}

TEST_F(TensorBoardCli, TagsEqualTheJsonLogOfTheSameIterations) {
  const RunResult r =
      run(train(" --train-iters 6 --eval-interval 3 --eval-iters 2 --log-json " +
                dir.file("log.json") + " --tensorboard-dir " + dir.file("tb") +
                " --log-validation-ppl-to-tensorboard --log-timers-to-tensorboard --log-throughput"
                " --log-memory-to-tensorboard --log-world-size-to-tensorboard"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_EQ(log.train.size(), 6u);
  const TbSeries s = only_file(dir.file("tb"));
  expect_train_series_match(s, log, 8);
  for (const char* tag : {"lm loss", "learning-rate", "grad-norm", "batch-size", "loss-scale",
                          "world-size", "iteration-time", "throughput", "forward-backward-time",
                          "all-grads-sync-time", "optimizer-time", "mem-allocated-bytes",
                          "mem-params-bytes", "mem-grads-bytes", "mem-optimizer-bytes",
                          "mem-activations-bytes", "mem-workspace-bytes", "mem-peak-rss-bytes"})
    ASSERT_EQ(s.count(tag), 1u) << tag;
  for (int64_t it = 1; it <= 6; ++it) {
    const nlohmann::json& j = log.train.at(it);
    EXPECT_EQ(s.at("loss-scale").at(it), 1.0f);
    EXPECT_EQ(s.at("world-size").at(it), 1.0f);
    expect_float_of(s.at("iteration-time").at(it), j.at("ms_per_iter").get<double>() * 1e-3,
                    "iteration-time");
    expect_float_of(s.at("throughput").at(it), j.at("tflops").get<double>(), "throughput");
    EXPECT_GT(s.at("forward-backward-time").at(it), 0.f);
    EXPECT_GT(s.at("optimizer-time").at(it), 0.f);
    EXPECT_GT(s.at("mem-params-bytes").at(it), 0.f);
    EXPECT_GE(s.at("mem-allocated-bytes").at(it), s.at("mem-params-bytes").at(it));
  }
  // Validation at 3 and at the end (6), with its perplexity.
  ASSERT_EQ(log.eval.size(), 2u);
  ASSERT_EQ(s.at("lm loss validation").size(), 2u);
  for (const nlohmann::json& e : log.eval) {
    const int64_t it = e.at("iteration").get<int64_t>();
    expect_float_of(s.at("lm loss validation").at(it), e.at("val_loss").get<double>(),
                    "lm loss validation");
    expect_float_of(s.at("lm loss validation ppl").at(it), e.at("val_ppl").get<double>(),
                    "lm loss validation ppl");
    expect_float_of(s.at("lm loss validation vs samples").at(8 * it),
                    e.at("val_loss").get<double>(), "lm loss validation vs samples");
  }
}

TEST_F(TensorBoardCli, DefaultsAndIntervalAsMegatron) {
  // Without the optional flags: no timers, memory, world size or perplexity;
  // --no-log-loss-scale-to-tensorboard drops loss-scale; every 2nd iteration.
  const RunResult r =
      run(train(" --train-iters 6 --eval-interval 2 --eval-iters 1"
                " --tensorboard-log-interval 2 --no-log-loss-scale-to-tensorboard"
                " --tensorboard-queue-size 10 --log-batch-size-to-tensorboard"
                " --tensorboard-dir " +
                dir.file("tb")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const TbSeries s = only_file(dir.file("tb"));
  std::set<std::string> tags;
  for (const auto& [tag, _] : s) tags.insert(tag);
  const std::set<std::string> want = {"lm loss",
                                      "lm loss vs samples",
                                      "learning-rate",
                                      "learning-rate vs samples",
                                      "batch-size",
                                      "batch-size vs samples",
                                      "grad-norm",
                                      "grad-norm vs samples",
                                      "lm loss validation",
                                      "lm loss validation vs samples"};
  EXPECT_EQ(tags, want);
  EXPECT_EQ(s.at("lm loss").size(), 3u);  // iterations 2, 4 and 6
  EXPECT_EQ(s.at("lm loss").count(2) + s.at("lm loss").count(4) + s.at("lm loss").count(6), 3u);
}

TEST_F(TensorBoardCli, FlagsWithoutTheDirectoryAreIgnored) {
  // As Megatron: without --tensorboard-dir nothing is written and nothing refused.
  const RunResult r =
      run(train(" --train-iters 6 --eval-interval 0 --log-timers-to-tensorboard"
                " --log-memory-to-tensorboard --log-validation-ppl-to-tensorboard"
                " --tensorboard-log-interval 3"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(TensorBoardCli, PipelineWritesOneFileFromTheLastRank) {
  const RunResult r =
      run(mpirun(2) + " train" + data + tiny_model_flags() +
          " --pipeline-model-parallel-size 2 --train-iters 6 --eval-interval 3 --eval-iters 1"
          " --log-memory-to-tensorboard --log-json " +
          dir.file("log.json") + " --tensorboard-dir " + dir.file("tb"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("TensorBoard: rank 1 writes"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("TensorBoard: rank 0"), std::string::npos) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_EQ(log.train.size(), 6u);
  const TbSeries s = only_file(dir.file("tb"));
  expect_train_series_match(s, log, 8);
  // The last stage's memory, not the first's (rank 0's --log-json report is the first stage's).
  EXPECT_GT(s.at("mem-params-bytes").at(1), 0.f);
  ASSERT_EQ(log.eval.size(), 2u);
  for (const nlohmann::json& e : log.eval)
    expect_float_of(s.at("lm loss validation").at(e.at("iteration").get<int64_t>()),
                    e.at("val_loss").get<double>(), "lm loss validation");
}

TEST_F(TensorBoardCli, AResumedRunAddsAFileThatContinuesTheSeries) {
  const std::string common = " --train-iters 8 --eval-interval 0 --tensorboard-dir " +
                             dir.file("tb") + " --log-json " + dir.file("log.json");
  const RunResult first = run(train(common + " --exit-interval 4 --save " + dir.file("c")));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(events_files(dir.file("tb")).size(), 1u);
  const RunResult second =
      run(train(common + " --load " + dir.file("c") + " --save " + dir.file("c")));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const std::vector<std::string> files = events_files(dir.file("tb"));
  ASSERT_EQ(files.size(), 2u);
  // Which file is which: the one holding iteration 1 came first.
  TbSeries a = scalars_by_tag(read_events_file(files[0]));
  TbSeries b = scalars_by_tag(read_events_file(files[1]));
  if (!a.count("lm loss") || !a.at("lm loss").count(1)) std::swap(a, b);
  std::vector<int64_t> steps_a, steps_b;
  for (const auto& [step, _] : a.at("lm loss")) steps_a.push_back(step);
  for (const auto& [step, _] : b.at("lm loss")) steps_b.push_back(step);
  EXPECT_EQ(steps_a, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(steps_b, (std::vector<int64_t>{5, 6, 7, 8}));
  // Both runs appended to the same --log-json: iterations 1-8, as the two files.
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_EQ(log.train.size(), 8u);
  for (const auto& [it, j] : log.train)
    expect_float_of((it <= 4 ? a : b).at("lm loss").at(it), j.at("loss").get<double>(),
                    "lm loss at " + std::to_string(it));
}

TEST_F(TensorBoardCli, MoeRunsWriteTheRouterLosses) {
  const RunResult r = run(train(
      " --train-iters 6 --eval-interval 0 --num-experts 4 --moe-router-topk 2"
      " --moe-ffn-hidden-size 48 --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001 --log-json " +
      dir.file("log.json") + " --tensorboard-dir " + dir.file("tb")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  const TbSeries s = only_file(dir.file("tb"));
  ASSERT_EQ(log.train.size(), 6u);
  for (const auto& [it, j] : log.train) {
    expect_float_of(s.at("load_balancing_loss").at(it), j.at("load_balancing_loss").get<double>(),
                    "load_balancing_loss");
    expect_float_of(s.at("z_loss").at(it), j.at("z_loss").get<double>(), "z_loss");
  }
}

// --mtp-num-layers: each depth's loss under Megatron's tag ("mtp_1 loss").
TEST_F(TensorBoardCli, MtpRunsWriteEachDepthsLoss) {
  const RunResult r = run(train(" --train-iters 3 --lr-warmup-iters 1 --eval-interval 0"
                                " --position-embedding-type rope"
                                " --mtp-num-layers 2 --log-json " + dir.file("log.json") +
                                " --tensorboard-dir " + dir.file("tb")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  const TbSeries s = only_file(dir.file("tb"));
  ASSERT_EQ(log.train.size(), 3u);
  for (const auto& [it, j] : log.train)
    for (const char* k : {"1", "2"}) {
      const std::string d = std::string("mtp_") + k;
      expect_float_of(s.at(d + " loss").at(it), j.at(d + "_loss").get<double>(), "mtp loss");
      expect_float_of(s.at(d + "_acceptance_rate").at(it),
                      j.at(d + "_acceptance_rate").get<double>(), "acceptance rate");
      const float cumulative = s.at(d + "_cumulative_acceptance_rate").at(it);
      EXPECT_GE(cumulative, 0.f);
      EXPECT_LE(cumulative, 100.f);
    }
  // The cumulative rate at the first iteration is that iteration's.
  const int64_t first = log.train.begin()->first;
  EXPECT_EQ(s.at("mtp_1_cumulative_acceptance_rate").at(first),
            s.at("mtp_1_acceptance_rate").at(first));
}

TEST_F(TensorBoardCli, ADirectoryThatCannotBeWrittenEndsEveryRankBeforeTraining) {
  std::ofstream(dir.file("a_file")) << "x";
  for (const int ranks : {1, 2}) {
    const std::string launch = ranks == 1 ? megatron() : mpirun(2);
    const RunResult f = run(launch + " train" + data + tiny_model_flags() +
                            " --train-iters 6 --tensorboard-dir " + dir.file("a_file"));
    EXPECT_NE(f.exit_code, 0) << f.output;
    EXPECT_NE(f.output.find("--tensorboard-dir " + dir.file("a_file") + " is not a directory"),
              std::string::npos)
        << f.output;
    EXPECT_EQ(f.output.find("iteration "), std::string::npos) << "it trained:\n" << f.output;
    const RunResult u = run(launch + " train" + data + tiny_model_flags() +
                            " --train-iters 6 --tensorboard-dir " + dir.file("a_file/tb"));
    EXPECT_NE(u.exit_code, 0) << u.output;
    EXPECT_NE(
        u.output.find("cannot create the --tensorboard-dir directory " + dir.file("a_file/tb")),
        std::string::npos)
        << u.output;
    EXPECT_EQ(u.output.find("iteration "), std::string::npos) << "it trained:\n" << u.output;
  }
}

}  // namespace tensorboard_test
}  // namespace mt::test
