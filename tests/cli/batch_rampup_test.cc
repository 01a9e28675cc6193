// Megatron's --rampup-batch-size START INCR SAMPLES: each iteration's global
// batch (logged in --log-json, the log line and TensorBoard) is Megatron's
// calculator's, recomputed here from its formula; the run trains
// update_train_iters' iterations; DP2 and PP2 train equal to one rank; a
// resume in the middle of the ramp equals the uninterrupted run; what
// Megatron refuses is refused, and a resume with another ramp too.
#include <cmath>

#include "bad_input_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace batch_rampup_test {

// Megatron's RampupBatchsizeNumMicroBatchesCalculator.update, written out
// again here: the batch after `consumed` samples.
int64_t expected_batch(int64_t consumed, int64_t start, int64_t incr, int64_t samples,
                       int64_t global) {
  if (consumed > samples) return global;
  const double per_increment = double(samples) / double((global - start) / incr);
  return start + int64_t(double(consumed) / per_increment) * incr;
}

// Start 2, +2 every 12 / 3 = 4 samples, up to 8: batches 2 2 4 6 8 8 over
// --train-samples 30 (the ramp's 4 iterations consume 14, then 2 x 8).
const char kRamp[] = " --train-iters 0 --lr-warmup-iters 0 --train-samples 30"
                     " --rampup-batch-size 2 2 12 --global-batch-size 8 --micro-batch-size 1"
                     " --lr-warmup-samples 6";

class BatchRampup : public BadInputFixture {
 protected:
  JsonLogLines train_log(const std::string& flags, const std::string& name) {
    const RunResult r = run(megatron() + train(flags + " --log-json " + dir.file(name)));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_log_json(dir.file(name));
  }
};

TEST_F(BatchRampup, LoggedBatchSizesAreMegatronsCalculators) {
  const JsonLogLines l = train_log(kRamp, "ramp.json");
  ASSERT_EQ(l.train.size(), 6u);
  int64_t consumed = 0;
  for (const auto& [it, j] : l.train) {
    const int64_t batch = expected_batch(consumed, 2, 2, 12, 8);
    consumed += batch;
    EXPECT_EQ(j.at("global_batch_size").get<int64_t>(), batch) << it;
    EXPECT_EQ(j.at("consumed_samples").get<int64_t>(), consumed) << it;
  }
  EXPECT_EQ(consumed, 30);
  std::vector<int64_t> got;
  for (const auto& [it, j] : l.train) got.push_back(j.at("global_batch_size").get<int64_t>());
  EXPECT_EQ(got, (std::vector<int64_t>{2, 2, 4, 6, 8, 8}));
  // The LR schedule counts samples: warm-up over 6 samples, iteration 2
  // (after 2 samples) at 2/6 of the peak, iteration 3 (after 4) at 4/6.
  EXPECT_NEAR(l.train.at(2).at("lr").get<double>(), 3e-3 * 2 / 6, 1e-12);
  EXPECT_NEAR(l.train.at(3).at("lr").get<double>(), 3e-3 * 4 / 6, 1e-12);
}

TEST_F(BatchRampup, ALongerRampFollowsTheFormulaWithFractionalSamplesPerIncrement) {
  // (32 - 4) / 4 = 7 increments over 50 samples: 7.14 samples each.
  const JsonLogLines l = train_log(" --train-iters 0 --lr-warmup-iters 0 --train-samples 200"
                                   " --rampup-batch-size 4 4 50 --global-batch-size 32"
                                   " --micro-batch-size 4 --num-layers 1",
                                   "long.json");
  int64_t consumed = 0, iterations = 0;
  while (consumed <= 50 && consumed <= 200) consumed += expected_batch(consumed, 4, 4, 50, 32), ++iterations;
  iterations += (200 - consumed) / 32;  // Megatron's update_train_iters
  ASSERT_EQ(int64_t(l.train.size()), iterations);
  consumed = 0;
  for (const auto& [it, j] : l.train) {
    EXPECT_EQ(j.at("global_batch_size").get<int64_t>(), expected_batch(consumed, 4, 4, 50, 32))
        << it;
    consumed += j.at("global_batch_size").get<int64_t>();
  }
}

TEST_F(BatchRampup, ResumeInTheMiddleOfTheRampEqualsTheUninterruptedRun) {
  const JsonLogLines whole = train_log(kRamp, "whole.json");
  // Stopped after iteration 3 (batch 4; the next is 6), then resumed.
  const std::string c = dir.file("c");
  const RunResult a = run(megatron() + train(std::string(kRamp) + " --exit-interval 3 --save " + c));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const JsonLogLines rest = train_log(std::string(kRamp) + " --load " + c, "rest.json");
  ASSERT_EQ(rest.train.size(), 3u);
  for (const auto& [it, j] : rest.train) {
    EXPECT_EQ(j.at("global_batch_size"), whole.train.at(it).at("global_batch_size")) << it;
    EXPECT_EQ(j.at("consumed_samples"), whole.train.at(it).at("consumed_samples")) << it;
    EXPECT_EQ(j.at("lr"), whole.train.at(it).at("lr")) << it;
    EXPECT_NEAR(j.at("loss").get<double>(), whole.train.at(it).at("loss").get<double>(),
                1e-6 * whole.train.at(it).at("loss").get<double>())
        << it;
  }
  // Another ramp on resume is refused, naming the flag and both values.
  expect_fails({"other ramp", train(std::string(kRamp) + " --rampup-batch-size 2 2 16 --load " + c),
                "was trained with --rampup-batch-size 2 2 12, this run with 2 2 16"});
}

TEST_F(BatchRampup, WhatMegatronRefusesIsRefused) {
  const std::string s = " --train-iters 0 --lr-warmup-iters 0 --train-samples 64 --micro-batch-size 1";
  const BadInputCase cases[] = {
      {"iteration-based", train(" --rampup-batch-size 2 2 12"),
       "--rampup-batch-size in an iteration-based (--train-iters) run"},
      {"start above", train(s + " --rampup-batch-size 16 2 12"),
       "--rampup-batch-size start 16 is above --global-batch-size 8"},
      {"increment does not divide", train(s + " --rampup-batch-size 2 4 12"),
       "--global-batch-size 8 - ramp-up start 2 = 6 is not divisible by the ramp-up increment 4"},
      {"nothing to ramp", train(s + " --rampup-batch-size 8 2 12"),
       "--rampup-batch-size start 8 equals --global-batch-size 8: nothing to ramp"},
      {"zero increment", train(s + " --rampup-batch-size 2 0 12"),
       "--rampup-batch-size increment 0 must be > 0"},
      {"micro-batch", train(s + " --rampup-batch-size 2 2 12 --micro-batch-size 4"),
       "--rampup-batch-size reaches a global batch of 2, not divisible by --micro-batch-size 4"},
      {"two values", train(s + " --rampup-batch-size 2 2"), "--rampup-batch-size"},
      {"decrease", train(s + " --decrease-batch-size-if-needed"),
       "--decrease-batch-size-if-needed: rounding the global batch down is not built"},
      {"step schedule and global batch", train(s + " --step-batch-size-schedule 0:8"),
       "--step-batch-size-schedule with --global-batch-size 8: Megatron-LM refuses both"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

// DP2 and PP2 (1F1B over 2, 2, 4, 6, 8 micro-batches) equal one rank.
TEST(BatchRampupLayouts, DataAndPipelineParallelMatchOneRank) {
  const double worst = expect_layouts_match_one_rank(
      tiny_model_flags() + kRamp + " --eval-interval 3 --eval-iters 1",
      {{"dp2", 2, ""},
       {"dp2_zero", 2, " --use-distributed-optimizer"},
       {"pp2", 2, " --pipeline-model-parallel-size 2"}},
      1e-5, {"loss", "global_batch_size"}, "batch ramp-up");
  EXPECT_LT(worst, 1e-5);
}

}  // namespace batch_rampup_test
}  // namespace mt::test
