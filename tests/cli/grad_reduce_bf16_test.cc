// `megatron train --bf16 --grad-reduce-in-bf16` end to end: the DP gradient
// reduction moves bf16 — the all-reduce at DP=2, the reduce-scatter at DP=2
// with the distributed optimizer (overlapped), TP=2 + SP x DP=2 (overlapped
// all-reduce), and PP=2 x DP=2 with ZeRO and the tied-embedding all-reduce
// (which stays fp32), and Megatron-FSDP's optim_grads at DP=2 and PP=2 x
// DP=2 (each part's reduce-scatter in bf16) — and trains to the losses
// of the same layout without the flag and of one rank, within the bf16
// rounding of the gradients; the bytes handed to the DP reduction halve
// (dp_grad_bytes_per_iter of --log-json). Without --bf16 the flag is refused.
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace mt::test {
namespace grad_reduce_bf16_test {

struct RunLog {
  std::vector<double> loss, grad_norm;
  std::vector<int64_t> dp_bytes;  // per iteration, rank 0
};

struct GradReduceBf16 : ::testing::Test {
  TempDir dir;
  std::string flags;
  void SetUp() override {
    flags = " train" + prepare_data(dir, synthetic_corpus(200)) + tiny_model_flags() +
            " --num-layers 2 --micro-batch-size 2 --global-batch-size 8 --eval-interval 0"
            " --hidden-dropout 0.1 --attention-dropout 0.1 --lr-warmup-iters 2"
            " --train-iters 4 --bf16";
  }
  RunLog train(const std::string& launcher, const std::string& extra) {
    const std::string log = dir.file("log.json");
    std::filesystem::remove(log);
    const RunResult r = run(launcher + flags + extra + " --log-json " + log);
    EXPECT_EQ(r.exit_code, 0) << extra << "\n" << r.output;
    RunLog out;
    for (const auto& [it, j] : read_log_json(log).train) {
      out.loss.push_back(j.at("loss").get<double>());
      out.grad_norm.push_back(j.at("grad_norm").get<double>());
      out.dp_bytes.push_back(j.at("dp_grad_bytes_per_iter").get<int64_t>());
    }
    return out;
  }
};

TEST_F(GradReduceBf16, HalvesTheDpBytesAndTrainsToTheSameLosses) {
  const RunLog one = train(megatron(), "");
  ASSERT_EQ(one.loss.size(), 4u);
  for (int64_t b : one.dp_bytes) EXPECT_EQ(b, 0) << "one rank reduces nothing";
  const std::string zero = " --use-distributed-optimizer --ddp-bucket-size 3000";
  const std::string fsdp = " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads";
  struct Layout {
    const char* name;
    int ranks;
    std::string flags;
  };
  const Layout layouts[] = {
      {"DP2", 2, ""},
      {"DP2 ZeRO overlapped", 2, zero + " --overlap-grad-reduce"},
      {"TP2 SP x DP2 overlapped", 4, " --tensor-model-parallel-size 2 --sequence-parallel"
                                     " --make-vocab-size-divisible-by 64 --overlap-grad-reduce"
                                     " --ddp-bucket-size 3000"},
      {"PP2 x DP2 ZeRO", 4, zero + " --pipeline-model-parallel-size 2"},
      {"DP2 FSDP optim_grads", 2, fsdp},
      {"PP2 x DP2 FSDP optim_grads", 4, fsdp + " --pipeline-model-parallel-size 2"},
  };
  double worst = 0;
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    const RunLog fp32 = train(mpirun(l.ranks), l.flags);
    const RunLog bf16 = train(mpirun(l.ranks), l.flags + " --grad-reduce-in-bf16");
    ASSERT_EQ(fp32.loss.size(), 4u);
    ASSERT_EQ(bf16.loss.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_GT(fp32.dp_bytes[i], 0) << "iteration " << i + 1;
      EXPECT_EQ(2 * bf16.dp_bytes[i], fp32.dp_bytes[i]) << "iteration " << i + 1;
      // The tolerance: see the comment below the loop.
      const double progress = std::abs(one.loss[0] - one.loss[i]);
      const double tol = 1e-5 * one.loss[i] + std::ldexp(progress, -8);
      EXPECT_NEAR(bf16.loss[i], fp32.loss[i], tol) << "iteration " << i + 1;
      EXPECT_NEAR(bf16.loss[i], one.loss[i], tol) << "iteration " << i + 1;
      worst = std::max(worst, std::abs(bf16.loss[i] - fp32.loss[i]) / one.loss[i]);
    }
    // Iteration 1 (before any update): the gradients themselves. Each
    // element is rounded twice at DP=2 (this rank's contribution, the
    // pairwise sum), 2^-8 relative each (bf16 has 8 significant bits), so the
    // norm is within 2^-7 — and not equal: the rounding did happen, and the
    // average (1/DP) with it.
    EXPECT_NEAR(bf16.grad_norm[0], fp32.grad_norm[0], std::ldexp(fp32.grad_norm[0], -7));
    EXPECT_NE(bf16.grad_norm[0], fp32.grad_norm[0]) << "the gradients were not rounded";
  }
  // The loss tolerance: the layouts' own fp32 round-off (1e-5 relative, as in
  // the bf16 layout tests) plus 2^-8 — one bf16 rounding — of what the
  // updates changed the loss by (|L_1 - L_i|; 0 at iteration 1, and the
  // losses of iteration 2 agree too: Adam's first step is sign(g)-like). If
  // every element's error pointed the same way the first-order bound would
  // be ~2^-5 of it (2 roundings, twice that through Adam's m / sqrt(v), the
  // clipping factor), but the errors are independent over the parameters and
  // cancel: measured at most ~7e-5 of the progress (printed below as a
  // fraction of the loss: 4.3e-6), some 50x under the tolerance. (A missing
  // 1/DP fails the grad-norm check above: Adam alone would not see it.)
  std::printf("--grad-reduce-in-bf16 vs fp32 reduction: worst relative loss difference %.3g\n",
              worst);
}

TEST_F(GradReduceBf16, NeedsBf16) {
  const RunResult r = run(megatron() + " train --help");
  EXPECT_NE(r.output.find("--grad-reduce-in-bf16"), std::string::npos) << r.output;
  const std::string fp32_flags = flags.substr(0, flags.rfind(" --bf16"));
  const RunResult bad = run(megatron() + fp32_flags + " --grad-reduce-in-bf16");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--grad-reduce-in-bf16 needs --bf16"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("fix: add --bf16"), std::string::npos) << bad.output;
  // With --accumulate-allreduce-grads-in-fp32 (local fp32 accumulation) it runs.
  const RunLog both = train(mpirun(2), " --grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32");
  ASSERT_EQ(both.loss.size(), 4u);
}

}  // namespace grad_reduce_bf16_test
}  // namespace mt::test
