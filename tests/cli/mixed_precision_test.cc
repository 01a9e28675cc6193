// `megatron train --bf16` and `--fp16` end to end:
//   - bf16 trains (loss falls), stays within bf16 round-off of fp32 for a few
//     steps but is not fp32, and gives the same losses (to the bf16 layout
//     tolerance) on one rank, at DP=2 with the distributed optimizer and the
//     overlapped bf16 parameter all-gather, at TP=2, PP=2, TP=2+SP x DP=2
//     ZeRO, PP=2 x DP=2 ZeRO and interleaved PP=2 (v=2) x DP=2 ZeRO;
//   - bf16 checkpoints keep the fp32 main weights and resume exactly;
//   - where the CPU has no bf16 instructions (or oneDNN no bf16 matmul), bf16
//     runs as rounded operands on fp32 GEMMs, with the same losses;
//   - fp16 starts at the 2^32 loss scale, skips the overflowing steps while
//     the scale backs off (hysteresis 2), then trains; the scaler's state
//     survives a checkpoint; a static --loss-scale never changes.
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "kernels/matmul.h"
#include "cli_test_util.h"

namespace mt::test {
namespace mixed_precision_test {

std::vector<double> losses(const JsonLogLines& log) {
  std::vector<double> out;
  for (const auto& [it, j] : log.train) out.push_back(j.at("loss").get<double>());
  return out;
}

struct MixedPrecision : ::testing::Test {
  TempDir dir;
  std::string flags;
  void SetUp() override {
    flags = " train" + prepare_data(dir, synthetic_corpus(200)) + tiny_model_flags() +
            " --num-layers 2 --micro-batch-size 2 --global-batch-size 8 --eval-interval 0"
            " --hidden-dropout 0.1 --attention-dropout 0.1 --lr-warmup-iters 2";
  }
  JsonLogLines train(const std::string& launcher, const std::string& extra, RunResult* out = nullptr) {
    const std::string log = dir.file("log.json");
    std::filesystem::remove(log);
    const RunResult r = run(launcher + flags + extra + " --log-json " + log);
    EXPECT_EQ(r.exit_code, 0) << extra << "\n" << r.output;
    if (out) *out = r;
    return read_log_json(log);
  }
};

TEST_F(MixedPrecision, Bf16TrainsNearFp32AndAgreesAcrossLayouts) {
  RunResult r;
  const auto fp32 = losses(train(megatron(), " --train-iters 4"));
  const auto bf16 = losses(train(megatron(), " --train-iters 4 --bf16", &r));
  // Which GEMMs run depends on the CPU: bf16 instructions or fp32 products of bf16 values.
  EXPECT_NE(r.output.find(matmul_bf16_native() ? "bf16: GEMMs on bf16 operands"
                                                : "multiplied in fp32 (the same products"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(bf16.size(), 4u);
  double max_diff = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(bf16[i], fp32[i], 1e-2 * fp32[i]) << "iteration " << i + 1;
    max_diff = std::max(max_diff, std::abs(bf16[i] - fp32[i]));
  }
  EXPECT_GT(max_diff, 1e-6) << "bf16 losses equal fp32's: bf16 GEMMs not in use";

  const std::string zero =
      " --train-iters 4 --bf16 --use-distributed-optimizer --overlap-param-gather --ddp-bucket-size 3000";
  const auto dp2 = losses(train(mpirun(2), zero));
  const auto tp2 = losses(train(mpirun(2), " --train-iters 4 --bf16 --tensor-model-parallel-size 2 "
                                           "--make-vocab-size-divisible-by 64"));
  const auto pp2 = losses(train(mpirun(2), " --train-iters 4 --bf16 --pipeline-model-parallel-size 2"));
  // Four ranks: ZeRO over DP=2 beside TP=2 + SP, and beside PP=2.
  const std::string zero4 = " --train-iters 4 --bf16 --use-distributed-optimizer --ddp-bucket-size 3000";
  const auto tp2dp2 = losses(train(mpirun(4), zero4 + " --tensor-model-parallel-size 2 "
                                                      "--sequence-parallel --make-vocab-size-divisible-by 64"));
  const auto pp2dp2 = losses(train(mpirun(4), zero4 + " --pipeline-model-parallel-size 2"));
  // The layouts differ from one rank only in the order of fp32 sums (TP
  // partial products, the DP average, SP reductions); bf16 rounding of the
  // weights and GEMM operands turns a last-bit fp32 difference into a rare
  // one-ulp bf16 flip (2^-8 relative) of single elements, which moves the
  // mean loss by ~1e-6 relative over four steps (1.1e-6 measured with bf16
  // activations, 2.7e-6 with fp32 ones; printed below). 1e-5 relative is
  // above that and below bf16 vs fp32 (the test above requires them to differ).
  double worst = 0;
  const std::pair<const char*, const std::vector<double>*> layouts[] = {
      {"DP2 ZeRO", &dp2}, {"TP2", &tp2}, {"PP2", &pp2}, {"TP2 SP x DP2 ZeRO", &tp2dp2},
      {"PP2 x DP2 ZeRO", &pp2dp2}};
  for (const auto& [name, l] : layouts) {
    ASSERT_EQ(l->size(), 4u) << name;
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR((*l)[i], bf16[i], 1e-5 * bf16[i]) << name << " iteration " << i + 1;
      worst = std::max(worst, std::abs((*l)[i] - bf16[i]) / bf16[i]);
    }
  }
  // Interleaved 1F1B (4 layers, one per virtual stage) x DP=2 ZeRO: bf16
  // stage boundaries and fp32 gradients between model chunks.
  const auto four = losses(train(megatron(), " --train-iters 4 --bf16 --num-layers 4"));
  const auto vpp = losses(train(mpirun(4), zero4 + " --num-layers 4 --pipeline-model-parallel-size 2"
                                                   " --num-layers-per-virtual-pipeline-stage 1"));
  ASSERT_EQ(four.size(), 4u);
  ASSERT_EQ(vpp.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(vpp[i], four[i], 1e-5 * four[i]) << "PP2 v2 x DP2 ZeRO iteration " << i + 1;
    worst = std::max(worst, std::abs(vpp[i] - four[i]) / four[i]);
  }
  std::printf("bf16 layouts vs one rank: worst relative loss difference %.3g\n", worst);
}

// bf16 checkpoints: the model file holds the bf16 weights (BF16, as Megatron
// saves a bf16 model), every DP rank's optimizer file its slices of the fp32
// main weights next to the moments. A ZeRO DP=2 run saved at iteration 3 and
// resumed gives exactly the losses of the run that never stopped; resumed on
// one rank with the plain optimizer (main weights assembled from both
// slices) it continues within the bf16 layout tolerance; an fp32 run resumed
// from it starts from the exact fp32 main weights, not their bf16 rounding.
TEST_F(MixedPrecision, Bf16CheckpointsKeepTheMainWeightsAndResumeExactly) {
  const std::string ckpt = dir.file("ckpt");
  const std::string zero = " --bf16 --use-distributed-optimizer --ddp-bucket-size 3000";
  const auto straight = losses(train(mpirun(2), " --train-iters 6" + zero));
  const auto first = losses(train(mpirun(2), " --train-iters 3 --save " + ckpt +
                                                 " --save-interval 3" + zero));
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(first.size(), 3u);
  const std::string rank_dir = ckpt + "/iter_0000003/mp_rank_00_000";
  {
    SafetensorsReader model(rank_dir + "/model.safetensors");
    for (const std::string& name : model.names())
      EXPECT_EQ(model.info(name).dtype, StDType::kBF16) << name;
    int64_t main_elements = 0;
    for (const char* f : {"/optim_dp_000.safetensors", "/optim_dp_001.safetensors"}) {
      SafetensorsReader optim(rank_dir + f);
      int64_t mine = 0;
      for (const std::string& name : optim.names())
        if (name.rfind("main_param.", 0) == 0) mine += optim.info(name).numel();
      EXPECT_GT(mine, 0) << f;
      main_elements += mine;
    }
    int64_t model_elements = 0;
    for (const std::string& name : model.names()) model_elements += model.info(name).numel();
    EXPECT_EQ(main_elements, model_elements) << "the DP slices of the main weights tile the model";
  }
  const auto resumed = losses(train(mpirun(2), " --train-iters 6 --load " + ckpt + zero));
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(resumed[i], straight[3 + i]) << "iteration " << 4 + i << " after the resume";
  const auto one_rank = losses(train(megatron(), " --train-iters 6 --bf16 --load " + ckpt));
  ASSERT_EQ(one_rank.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(one_rank[i], straight[3 + i], 1e-5 * straight[3 + i]) << "iteration " << 4 + i;
  // fp32 from the bf16 checkpoint: the main weights (what --bf16 would have
  // continued from) — its next loss is closer to bf16's than to a run from
  // the bf16-rounded weights (--no-load-optim reads the model file).
  const auto fp32_main = losses(train(megatron(), " --train-iters 4 --load " + ckpt));
  const auto fp32_rounded =
      losses(train(megatron(), " --train-iters 4 --no-load-optim --load " + ckpt));
  ASSERT_EQ(fp32_main.size(), 1u);
  ASSERT_EQ(fp32_rounded.size(), 1u);
  EXPECT_NE(fp32_main[0], fp32_rounded[0]) << "the fp32 run loaded the bf16 rounding";
  EXPECT_NEAR(fp32_main[0], straight[3], 1e-2 * straight[3]);
}

// A CPU where oneDNN has no bf16 matmul (simulated: ONEDNN_MAX_CPU_ISA=AVX2):
// the run still works, says so once, and gives the losses of native bf16.
TEST_F(MixedPrecision, Bf16WithoutOneDnnBf16FallsBackToTheSameNumbers) {
  RunResult r;
  const auto native = losses(train(megatron(), " --train-iters 3 --bf16"));
  const auto fallback =
      losses(train("env ONEDNN_MAX_CPU_ISA=AVX2 " + megatron(), " --train-iters 3 --bf16", &r));
  EXPECT_NE(r.output.find("no native bf16 matmul here"), std::string::npos) << r.output;
  ASSERT_EQ(fallback.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(fallback[i], native[i], 1e-5 * native[i]) << "iteration " << i + 1;
}

TEST_F(MixedPrecision, Bf16LearnsOverManySteps) {
  const auto l = losses(train(megatron(), " --train-iters 40 --bf16"));
  ASSERT_EQ(l.size(), 40u);
  EXPECT_LT(l.back(), 0.8 * l.front());
}

TEST_F(MixedPrecision, Fp16DynamicLossScaleBacksOffThenTrainsAndResumes) {
  const std::string ckpt = dir.file("ckpt");
  const JsonLogLines log =
      train(megatron(), " --train-iters 40 --fp16 --save " + ckpt + " --save-interval 40");
  ASSERT_EQ(log.train.size(), 40u);
  int64_t skipped = 0, first_update = -1;
  double prev_scale = std::ldexp(1.0, 32);
  int overflows_at_scale = 0;
  for (const auto& [it, j] : log.train) {
    const double scale = j.at("loss_scale").get<double>();
    const bool skip = j.at("skipped_iterations").get<int64_t>() > 0;
    // Powers of two, never above the initial 2^32, never growing within 40
    // steps (the window is 1000).
    EXPECT_EQ(std::ldexp(1.0, std::ilogb(scale)), scale) << "iteration " << it;
    EXPECT_LE(scale, prev_scale) << "iteration " << it;
    if (skip) {
      ++skipped;
      overflows_at_scale += scale == prev_scale;
    } else if (first_update < 0) {
      first_update = it;
    }
    prev_scale = scale;
  }
  // 2^32 overflows fp16 at once: the first overflow only spends the
  // hysteresis (the scale stays 2^32), every further one halves it.
  EXPECT_EQ(log.train.at(1).at("loss_scale").get<double>(), std::ldexp(1.0, 32));
  EXPECT_EQ(overflows_at_scale, 1);
  EXPECT_GT(skipped, 5);
  ASSERT_GT(first_update, 0) << "fp16 never completed a step";
  // The LR schedule advances only on updates (Megatron): the first update
  // uses the first iteration's learning rate.
  EXPECT_EQ(log.train.at(first_update).at("lr").get<double>(),
            log.train.at(1).at("lr").get<double>());
  EXPECT_GT(log.train.at(first_update + 1).at("lr").get<double>(),
            log.train.at(first_update).at("lr").get<double>());
  EXPECT_LT(log.train.rbegin()->second.at("loss").get<double>(),
            log.train.at(first_update).at("loss").get<double>());
  // Resume: the scale continues from the checkpoint, not from 2^32.
  const double saved_scale = log.train.rbegin()->second.at("loss_scale").get<double>();
  const JsonLogLines resumed = train(megatron(), " --train-iters 41 --fp16 --load " + ckpt);
  ASSERT_EQ(resumed.train.size(), 1u);
  EXPECT_LE(resumed.train.begin()->second.at("loss_scale").get<double>(), saved_scale);
  EXPECT_GE(resumed.train.begin()->second.at("loss_scale").get<double>(), saved_scale / 2);
}

TEST_F(MixedPrecision, Fp16StaticLossScaleStays) {
  const JsonLogLines log = train(megatron(), " --train-iters 5 --fp16 --loss-scale 1024");
  ASSERT_EQ(log.train.size(), 5u);
  for (const auto& [it, j] : log.train) {
    EXPECT_EQ(j.at("loss_scale").get<double>(), 1024.0);
    EXPECT_EQ(j.at("skipped_iterations").get<int64_t>(), 0);
  }
}

// `megatron train --help` says which bytes live where, with the formulas.
TEST_F(MixedPrecision, HelpSaysWhichBytesLiveWhere) {
  const RunResult r = run(megatron() + " train --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* words : {"Memory per rank", "fp32 main weights (4P)", "6 + 12/d", "8 + 8/d",
                            "bf16 with --bf16", "resumes are exact"})
    EXPECT_NE(r.output.find(words), std::string::npos) << "missing '" << words << "'\n" << r.output;
}

TEST_F(MixedPrecision, BadFlagsAreRefused) {
  RunResult r = run(megatron() + flags + " --train-iters 2 --bf16 --fp16");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bf16 and --fp16 are both set"), std::string::npos) << r.output;
  r = run(megatron() + flags + " --train-iters 2 --overlap-param-gather");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--overlap-param-gather needs --use-distributed-optimizer"),
            std::string::npos)
      << r.output;
}

}  // namespace mixed_precision_test
}  // namespace mt::test
