// Megatron-FSDP end to end under mpirun (--use-megatron-fsdp
// --data-parallel-sharding-strategy optim_grads = ZeRO-2: gradients sharded;
// optim_grads_params = ZeRO-3: weights too): a GPT with dropout and clipping
// gives one rank's losses, gradient norms and validation losses (1e-5
// relative: round-off only) at DP4, DP2 with small buckets, TP2 (SP) x DP2,
// PP2 x DP2, an interleaved PP2 x DP2, CP2 x DP2 and DP2 with full recompute
// (8 micro-batches per step at DP1, fewer with more DP), under both
// strategies, as does `optim` (the distributed optimizer); so does a
// Llama-style model with an untied output layer (its gradient written by the
// fused loss head in forward); bf16 gives the bf16 one-rank losses within the
// bf16 layout tolerance (1e-5, as mixed_precision_test's) and fp16 the fp16
// one-rank losses. Checkpoints saved under optim_grads at DP2 and under
// optim_grads_params at DP4 resume without FSDP at TP2 with the
// uninterrupted losses, and a ZeRO-1 checkpoint resumes under both. ZeRO-3's
// measured bytes per parameter at DP4 are within 15% of 16/4 (fp32) and 18/4
// (bf16); it prefetches the next layer's weights and reports the gathers and
// the time they were exposed. ZeRO-3 without data parallelism and FSDP on the
// GPU are refused in one line.
#include <cmath>
#include <map>
#include <regex>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bad_input_util.h"
#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace fsdp_test {

const std::string kFsdp = " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads";
const std::string kZero3 =
    " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params";

// Micro-batch 1 and global batch 8: up to 8 micro-batches per step, DP up to 4.
std::string model_flags() {
  return " --num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 1 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1"
         " --hidden-dropout 0.1 --attention-dropout 0.1"
         " --train-iters 6 --eval-interval 3 --eval-iters 1";
}

// Runs one rank and every layout with `model` flags and compares their logs
// (losses and validation to tol, grad norms to 10 x tol); clipping must have
// been active.
void expect_layouts_match_one_rank(const std::string& model, const std::vector<Layout>& layouts,
                                   double tol = 1e-5) {
  double max_norm = 0;
  mt::test::expect_layouts_match_one_rank(
      model, layouts, tol, {"loss"}, "FSDP layouts",
      [&](const Layout&, const RunResult&, const JsonLogLines& ref, const JsonLogLines&) {
        for (const auto& [it, j] : ref.train)
          max_norm = std::max(max_norm, j.at("grad_norm").get<double>());
      });
  EXPECT_GT(max_norm, 1.0) << "clipping never active";
}

TEST(Fsdp, ShardedGradientsMatchOneRank) {
  expect_layouts_match_one_rank(
      model_flags(),
      {{"dp4", 4, kFsdp},
       {"dp2_buckets", 2, kFsdp + " --ddp-bucket-size 3000 --overlap-grad-reduce"},
       {"tp2_sp_dp2", 4, kFsdp + " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"pp2_dp2", 4, kFsdp + " --pipeline-model-parallel-size 2"},
       {"vpp_dp2", 4,
        kFsdp + " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"},
       {"cp2_dp2", 4, kFsdp + " --context-parallel-size 2"},
       {"dp2_recompute", 2,
        kFsdp + " --recompute-granularity full --recompute-method uniform"
                " --recompute-num-layers 1 --overlap-param-gather"},
       {"dp2_optim", 2, " --use-megatron-fsdp --data-parallel-sharding-strategy optim"}});
}

// ZeRO-3: each part's weights gathered before its forward, its backward and
// a recomputed forward, from this rank's pieces.
TEST(Fsdp, ShardedWeightsMatchOneRank) {
  expect_layouts_match_one_rank(
      model_flags(),
      {{"dp4", 4, kZero3},
       {"dp2_buckets", 2, kZero3 + " --ddp-bucket-size 3000"},
       {"tp2_sp_dp2", 4, kZero3 + " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"pp2_dp2", 4, kZero3 + " --pipeline-model-parallel-size 2"},
       {"vpp_dp2", 4,
        kZero3 + " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"},
       {"cp2_dp2", 4, kZero3 + " --context-parallel-size 2"},
       {"dp2_recompute", 2,
        kZero3 + " --recompute-granularity full --recompute-method uniform"
                 " --recompute-num-layers 2"}});
}

// ZeRO-3 prefetches the layer expected next while the current one computes
// and reports the gathers per iteration, how many a prefetch had started and
// the time the step still blocked on them.
TEST(Fsdp, Zero3PrefetchesAndReportsExposedGatherTime) {
  TempDir dir;
  const std::string log = dir.file("log.json");
  const RunResult r = run(mpirun(2) + " train" + prepare_data(dir, synthetic_corpus(200)) +
                          model_flags() + vocab_padding("") + kZero3 + " --log-json " + log);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weight gathers/iter: "), std::string::npos) << r.output;
  for (const auto& [it, j] : read_log_json(log).train) {
    const double gathers = j.at("weight_gathers_per_iter").get<double>();
    const double prefetched = j.at("weight_gathers_prefetched_per_iter").get<double>();
    // 4 layers, 4 micro-batches: each layer at least once forward, the
    // embeddings and the loss head once; most layers' gathers prefetched.
    EXPECT_GE(gathers, 4 + 2) << "iteration " << it;
    EXPECT_GE(prefetched, 0.5 * gathers) << "iteration " << it;
    EXPECT_LE(prefetched, gathers) << "iteration " << it;
    EXPECT_GE(j.at("weight_gather_exposed_ms_per_iter").get<double>(), 0) << "iteration " << it;
  }
}

// Untied output layer (Llama-style): its gradient is written in forward and
// reduced with the loss head; the input embedding's at the end of backward.
TEST(Fsdp, UntiedOutputLayerMatchesOneRank) {
  expect_layouts_match_one_rank(
      model_flags() +
          " --normalization RMSNorm --position-embedding-type rope --swiglu"
          " --disable-bias-linear --untie-embeddings-and-output-weights",
      {{"dp2", 2, kFsdp},
       {"pp2_dp2", 4, kFsdp + " --pipeline-model-parallel-size 2"},
       {"dp2_zero3", 2, kZero3},
       {"pp2_dp2_zero3", 4, kZero3 + " --pipeline-model-parallel-size 2"}});
}

// bf16: a layout differs from one rank in the order of fp32 sums, which bf16
// rounding turns into rare one-ulp flips; their size depends on the CPU's
// GEMM blocking (where bf16 is emulated in fp32 GEMMs, as on Cascade Lake,
// TP2 x SP x DP2 measured losses 9.8e-6 and grad norms 1.7e-4 relative with
// or without FSDP). So the layouts are held to the bf16 layout tolerance
// (context_parallel_test's 5e-5, grad norms 5e-4) against one rank, and
// FSDP's losses to round-off against the same layout without it: its
// per-micro-batch reduce-scatters sum the gradients in another order, a
// difference of the same kind as the layout's own from one rank, so FSDP may
// move the losses no further from the plain layout than the plain layouts
// are from one rank (or 1e-6, where that is less). The size is the CPU's:
// with AMX-BF16 GEMMs FSDP stayed within 1e-6; with AVX512-BF16 alone
// (no AMX) TP2 x SP x DP2 measured 2.96e-6 at iteration 5, the plain layouts
// 6.61e-6 from one rank.
TEST(Fsdp, Bf16MatchesBf16OneRank) {
  const std::string tp2 = " --tensor-model-parallel-size 2 --sequence-parallel";
  const std::vector<Layout> fsdp = {{"dp2", 2, kFsdp}, {"tp2_sp_dp2", 4, kFsdp + tp2}};
  std::map<std::string, JsonLogLines> with_fsdp;
  mt::test::expect_layouts_match_one_rank(model_flags() + " --bf16", fsdp, 5e-5, {"loss"},
                                "FSDP bf16 layouts",
                                [&](const Layout& l, const RunResult&, const JsonLogLines&,
                                    const JsonLogLines& got) { with_fsdp[l.tag] = got; });
  std::map<std::string, JsonLogLines> plain;
  const double plain_worst = mt::test::expect_layouts_match_one_rank(model_flags() + " --bf16",
                                {{"dp2", 2, ""}, {"tp2_sp_dp2", 4, tp2}}, 5e-5, {"loss"},
                                "the same layouts without FSDP, bf16",
                                [&](const Layout& l, const RunResult&, const JsonLogLines&,
                                    const JsonLogLines& got) { plain[l.tag] = got; });
  const double round_off = std::max(1e-6, plain_worst);
  for (const Layout& l : fsdp) {
    ASSERT_EQ(with_fsdp.count(l.tag), 1u) << l.tag;
    ASSERT_EQ(plain.count(l.tag), 1u) << l.tag;
    for (const auto& [it, j] : plain[l.tag].train)
      EXPECT_LE(rel(j.at("loss").get<double>(), with_fsdp[l.tag].train.at(it).at("loss").get<double>()),
                round_off)
          << l.tag << " iteration " << it << ": FSDP's loss vs the same layout without it (the "
          << "plain layouts' worst from one rank: " << plain_worst << ")";
  }
}

// fp16 with dynamic loss scaling: the overflow check and the unscaling read the shard.
TEST(Fsdp, Fp16MatchesFp16OneRank) {
  expect_layouts_match_one_rank(model_flags() + " --fp16 --initial-loss-scale 65536",
                                {{"dp2", 2, kFsdp}, {"dp2_zero3", 2, kZero3}});
}

// Checkpoints keep the distributed optimizer's format: saved under
// optim_grads at DP2 or optim_grads_params at DP4 they resume without FSDP
// at TP2 (plain optimizer), and a ZeRO-1 save resumes under optim_grads and
// optim_grads_params, with the uninterrupted losses.
TEST(Fsdp, CheckpointsResumeWithAndWithoutFsdp) {
  const std::string data_flags =
      " --train-iters 10 --eval-interval 0 --hidden-dropout 0.1"
      " --micro-batch-size 2";  // (the later flag wins: DP4 fits 8)
  for (const auto& [ranks, save_flags] : {std::pair<int, std::string>{2, kFsdp}, {4, kZero3}}) {
    TempDir dir;
    const std::string flags =
        " train" + prepare_data(dir, synthetic_corpus(200)) + tiny_model_flags() + data_flags;
    const std::string launch = mpirun(ranks) + flags + " --make-vocab-size-divisible-by 64";
    const JsonLogLines ref = save_at_5_and_resume(dir, launch + save_flags);
    expect_resume_equal(
        dir, "tp2_plain",
        mpirun(2) + flags + " --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 32",
        ref, 1e-5);
    if (HasFatalFailure()) return;
  }
  TempDir dir;
  const std::string flags =
      " train" + prepare_data(dir, synthetic_corpus(200)) + tiny_model_flags() + data_flags;
  const std::string dp2 = mpirun(2) + flags + " --make-vocab-size-divisible-by 64";
  const JsonLogLines ref = save_at_5_and_resume(dir, dp2 + " --use-distributed-optimizer");
  expect_resume_equal(dir, "dp2_fsdp", dp2 + kFsdp, ref, 1e-5);
  expect_resume_equal(dir, "dp2_zero3", dp2 + kZero3, ref, 1e-5);
}

// ZeRO-3's bytes per parameter (weights + gradients + optimizer state,
// measured by --log-memory) at DP4 are within 15% of Megatron's 16/4 in
// fp32 and 18/4 in bf16: a model of 32 layers, so that the pools (the
// embeddings, the loss head and two layers for the weights, one for the
// gradients) are small beside the shards.
TEST(Fsdp, Zero3BytesPerParameterAtDp4) {
  TempDir dir;
  const std::string flags = " train" + prepare_data(dir, synthetic_corpus(100)) +
                            " --num-layers 32 --hidden-size 512 --num-attention-heads 8"
                            " --seq-length 64 --micro-batch-size 1 --global-batch-size 4"
                            " --train-iters 1 --lr 1e-4 --split 90,10,0 --eval-interval 0"
                            " --peak-tflops 1 --log-memory --make-vocab-size-divisible-by 64";
  for (const auto& [precision, want] :
       {std::pair<std::string, double>{"", 16.0 / 4}, {" --bf16", 18.0 / 4}}) {
    const std::string log = dir.file(precision.empty() ? "zero3.json" : "zero3_bf16.json");
    const RunResult r = run(mpirun(4) + flags + kZero3 + precision + " --log-json " + log);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The model's parameters, as the header counts them (what a one-rank fp32
    // run predicts as its weight bytes / 4).
    std::smatch count;
    ASSERT_TRUE(std::regex_search(r.output, count, std::regex("\\| ([0-9]+) parameters\n")))
        << r.output;
    const double params = std::stod(count[1]);
    for (const auto& [rank, m] : read_log_json(log).memory_by_rank) {
      double measured = 0, predicted = 0;
      for (const char* c : {"params", "grads", "optimizer"}) {
        measured += m.at(c).at("measured_bytes").get<double>();
        predicted += m.at(c).at("predicted_bytes").get<double>();
      }
      EXPECT_NEAR(measured / params, want, 0.15 * want)
          << precision << " rank " << rank << ": " << measured << " bytes for " << params
          << " parameters";
      EXPECT_NEAR(measured / predicted, 1.0, 0.05) << precision << " rank " << rank;
      std::printf("ZeRO-3%s DP4 rank %d: %.3f bytes per parameter measured, %.3f predicted\n",
                  precision.c_str(), rank, measured / params, predicted / params);
    }
  }
}

class FsdpBadArgs : public BadInputFixture {};

TEST_F(FsdpBadArgs, WhatIsNotBuiltIsRefusedInOneLine) {
  const BadInputCase cases[] = {
      {"ZeRO-3 on one rank", train(kZero3),
       "--data-parallel-sharding-strategy optim_grads_params without data parallelism (DP x CP "
       "= 1 on 1 ranks"},
      {"bad strategy", train(" --use-megatron-fsdp --data-parallel-sharding-strategy zero2"),
       "--data-parallel-sharding-strategy 'zero2' is not one of"},
      {"GPU", train(kFsdp + " --device cuda"),
       "--data-parallel-sharding-strategy optim_grads on --device cuda is not implemented yet"},
      {"GPU ZeRO-3", train(kZero3 + " --device cuda"),
       "--data-parallel-sharding-strategy optim_grads_params on --device cuda is not "
       "implemented yet"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

}  // namespace fsdp_test
}  // namespace mt::test
