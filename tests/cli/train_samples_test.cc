// Megatron's sample-based training: --train-samples N trains N / global batch
// iterations; --lr-decay-samples, --lr-warmup-samples and a warm-up fraction
// set the schedule in samples (equal to the iteration-based one where the
// batch divides them, Megatron's sample counts where it does not); mixing
// iteration- and sample-based flags is refused as Megatron refuses it.
#include <cmath>

#include "bad_input_util.h"

namespace mt::test {
namespace train_samples_test {

class TrainSamples : public BadInputFixture {
 protected:
  JsonLogLines train_log(const std::string& flags, const std::string& name) {
    const RunResult r = run(megatron() + train(flags + " --log-json " + dir.file(name)));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_log_json(dir.file(name));
  }
};

TEST_F(TrainSamples, SamplesGiveTheIterationsAndTheScheduleOfTheIterationFlags) {
  // (train() passes --train-iters 8 --lr-warmup-iters 5; --train-iters 0 and
  // --lr-warmup-iters 0 clear them, as a later flag wins.)
  const std::string samples =
      " --train-iters 0 --lr-warmup-iters 0 --train-samples 48 --lr-decay-samples 40"
      " --lr-warmup-samples 16 --global-batch-size 8";
  const std::string iters = " --train-iters 6 --lr-decay-iters 5 --lr-warmup-iters 2 --global-batch-size 8";
  const JsonLogLines s = train_log(samples, "s.json"), i = train_log(iters, "i.json");
  ASSERT_EQ(s.train.size(), 6u);  // 48 samples / 8
  ASSERT_EQ(i.train.size(), 6u);
  for (const auto& [it, j] : i.train) {
    EXPECT_EQ(j.at("lr"), s.train.at(it).at("lr")) << it;
    EXPECT_EQ(j.at("loss"), s.train.at(it).at("loss")) << it;
  }
  // 52 samples: 6 iterations (Megatron's floor), the last 4 samples untrained.
  EXPECT_EQ(train_log(" --train-iters 0 --lr-warmup-iters 0 --train-samples 52 --global-batch-size 8",
                      "floor.json").train.size(), 6u);
}

TEST_F(TrainSamples, LengthsTheBatchDoesNotDivideAreCountedInSamples) {
  // Warm-up over 12 samples at batch 8: iteration 2 (after 8 samples) at 8/12 of the peak.
  const JsonLogLines l = train_log(" --train-iters 0 --lr-warmup-iters 0 --train-samples 32"
                                   " --lr-warmup-samples 12 --global-batch-size 8 --lr 3e-3",
                                   "frac.json");
  ASSERT_EQ(l.train.size(), 4u);
  EXPECT_EQ(l.train.at(1).at("lr").get<double>(), 0.0);
  EXPECT_NEAR(l.train.at(2).at("lr").get<double>(), 3e-3 * 8 / 12, 1e-12);
  // A warm-up fraction of a sample-based decay: 0.3 x 40 samples = 12 samples, the same.
  const JsonLogLines f = train_log(" --train-iters 0 --lr-warmup-iters 0 --train-samples 32"
                                   " --lr-decay-samples 40 --lr-warmup-fraction 0.3"
                                   " --global-batch-size 8 --lr 3e-3",
                                   "fraction.json");
  EXPECT_NEAR(f.train.at(2).at("lr").get<double>(), 3e-3 * 8 / 12, 1e-12);
}

TEST_F(TrainSamples, MixingIterationAndSampleFlagsIsRefusedAsMegatronDoes) {
  const std::string to_samples = " --train-iters 0 --lr-warmup-iters 0 --train-samples 48";
  const BadInputCase cases[] = {
      {"both", train(" --train-samples 48"), "--train-samples 48 in an iteration-based"},
      {"decay samples", train(" --lr-decay-samples 40"), "--lr-decay-samples 40 in an iteration-based"},
      {"warm-up samples", train(" --lr-warmup-samples 8"), "fix: give the schedule in iterations"},
      {"decay iters", train(to_samples + " --lr-decay-iters 5"),
       "--lr-decay-iters 5 in a sample-based (--train-samples) run"},
      {"warm-up iters", train(to_samples + " --lr-warmup-iters 2"),
       "fix: give the schedule in samples (--lr-decay-samples"},
      {"fraction and samples", train(to_samples + " --lr-warmup-samples 8 --lr-warmup-fraction 0.1"),
       "--lr-warmup-fraction and --lr-warmup-samples are both set"},
      {"neither", train(" --train-iters 0"), "neither --train-iters nor --train-samples is given"},
      {"less than a batch", train(to_samples.substr(0, to_samples.size() - 2) + "4"),
       "--train-samples 4 is less than one global batch (8 sequences)"},
      {"negative", train(" --lr-warmup-samples -8"), "--lr-warmup-samples -8 must be >= 0"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

}  // namespace train_samples_test
}  // namespace mt::test
