// Mixture of experts end to end (issue 29): a Llama-style MoE (4 experts,
// top-2, aux and z loss, dropout on) gives one rank's losses, gradient norms,
// router losses and validation losses (1e-5 relative; round-off only) at
// EP2 (all-to-all and all-gather dispatchers), EP2 x DP2 (with and without
// the distributed optimizer), TP2 (SP) x EP2, PP2 x EP2, CP2 x EP2, full
// recompute, bf16 (with and without --moe-router-dtype fp32, which a
// checkpoint records), an interleaved pipeline and Megatron-FSDP's sharded
// gradients (optim_grads: experts sharded over expert DP); with a capacity factor that drops tokens, EP2 x DP2
// equals one rank; at TP > 1 without --expert-tensor-parallel-size a warning
// says the experts stay whole (Megatron's default would split them over TP);
// misfit MoE flags are refused in one line.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bad_input_util.h"
#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace moe_test {

// Micro-batch 2 and global batch 8: DP up to 4 without changing the batch.
std::string moe_flags(int layers = 2) {
  return " --num-layers " + std::to_string(layers) +
         " --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --clip-grad 1.0"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1"
         " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
         " --disable-bias-linear --untie-embeddings-and-output-weights"
         " --hidden-dropout 0.1 --attention-dropout 0.1"
         " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48"
         " --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001"
         " --train-iters 6 --eval-interval 3 --eval-iters 1";
}

// Runs one rank and every layout with `model` flags and compares their logs:
// losses and router losses to tol (fp32 round-off by default), grad norms to
// 10 x tol; in fp32 the busiest expert's share is the same (the same routing);
// at TP > 1 without --expert-tensor-parallel-size Megatron would split the
// experts over TP, and a warning says that they stay whole.
void expect_layouts_match_one_rank(const std::string& model, const std::vector<Layout>& layouts,
                                   double tol = 1e-5) {
  mt::test::expect_layouts_match_one_rank(
      model, layouts, tol, {"loss", "load_balancing_loss", "z_loss"}, "MoE layouts",
      [tol](const Layout& l, const RunResult& r, const JsonLogLines& ref, const JsonLogLines& got) {
        const bool tp2 = l.flags.find("--tensor-model-parallel-size 2") != std::string::npos;
        EXPECT_EQ(r.output.find("warning: --expert-tensor-parallel-size not given: each expert "
                                "is whole on its rank") != std::string::npos,
                  tp2)
            << l.tag << "\n" << r.output;
        if (tol > 1e-5) return;  // bf16: routing may flip on a tie
        for (const auto& [it, j] : ref.train)
          EXPECT_EQ(j.at("busiest_expert_share").get<double>(),
                    got.train.at(it).at("busiest_expert_share").get<double>())
              << l.tag << " iteration " << it << ": routing differs";
      });
}

TEST(Moe, ExpertParallelLayoutsMatchOneRank) {
  expect_layouts_match_one_rank(
      moe_flags(),
      {{"ep2_alltoall", 2, " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"ep2_allgather", 2,
        " --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather"},
       {"ep2_dp2", 4, " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"ep2_dp2_zero", 4, " --expert-model-parallel-size 2 --use-distributed-optimizer"},
       {"ep2_grouped", 2, " --expert-model-parallel-size 2 --moe-grouped-gemm"},
       {"grouped", 2, " --moe-grouped-gemm --moe-token-dispatcher-type alltoall"},
       {"dp2_zero", 2, " --use-distributed-optimizer"}});
}

TEST(Moe, ExpertParallelComposesWithTpPpCp) {
  expect_layouts_match_one_rank(
      moe_flags(),
      {{"tp2_sp_ep2", 2,
        " --tensor-model-parallel-size 2 --sequence-parallel"
        " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"pp2_ep2", 4, " --pipeline-model-parallel-size 2 --expert-model-parallel-size 2"},
       {"cp2_ep2", 2,
        " --context-parallel-size 2 --expert-model-parallel-size 2"
        " --moe-token-dispatcher-type alltoall"},
       {"ep2_recompute", 2,
        " --expert-model-parallel-size 2 --recompute-granularity full"
        " --recompute-method uniform --recompute-num-layers 1"}});
}

// Megatron-FSDP's optim_grads: each layer's dense gradients reduce-scattered
// over DP x CP and its experts' over expert DP, in every micro-batch; with
// optim_grads_params their weights gathered over the same groups.
TEST(Moe, ShardedGradientsMatchOneRank) {
  const std::string fsdp = " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads";
  expect_layouts_match_one_rank(
      moe_flags(),
      {{"ep2_dp2_fsdp", 4, fsdp + " --expert-model-parallel-size 2"},
       {"dp2_fsdp", 2, fsdp},
       {"tp2_sp_ep2_fsdp", 2,
        fsdp + " --tensor-model-parallel-size 2 --sequence-parallel"
               " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"pp2_ep2_fsdp", 4, fsdp + " --pipeline-model-parallel-size 2 --expert-model-parallel-size 2"},
       {"ep2_dp2_zero3", 4,
        " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"
        " --expert-model-parallel-size 2"}});
}

// bf16 runs (bf16 expert weights and activations, fp32 router logits) match
// one bf16 rank: the same operands per expert row; a GEMM of other row counts
// may sum in another order, and a bf16-rounded activation turns that into up
// to an ulp of bf16 (2^-8) on an element: 1e-4 on the mean loss (measured
// 2.2e-6 on AVX512-BF16).
TEST(Moe, Bf16MatchesOneRank) {
  expect_layouts_match_one_rank(
      moe_flags() + " --bf16",
      {{"ep2_bf16", 2, " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"}},
      1e-4);
}

// --moe-router-dtype fp32 in bf16 runs (the router's logits, softmax and
// top-k in fp32; tests/model/moe_router_dtype_test.cc shows they are the fp32
// ones) matches one bf16 rank with the flag at EP2 and at TP2 (SP), to the
// bf16 tolerance above.
TEST(Moe, Bf16WithFp32RouterMatchesOneRank) {
  expect_layouts_match_one_rank(
      moe_flags() + " --bf16 --moe-router-dtype fp32",
      {{"ep2_bf16_router_fp32", 2,
        " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"tp2_sp_bf16_router_fp32", 2, " --tensor-model-parallel-size 2 --sequence-parallel"}},
      1e-4);
}

// The checkpoint records --moe-router-dtype; a resume without it (the
// router in the run's dtype) is another computation and is refused by name.
TEST(Moe, RouterDtypeIsStoredAndAResumeWithoutItIsRefused) {
  TempDir dir;
  const std::string save = dir.file("ckpt");
  std::string base = " train" + prepare_data(dir, synthetic_corpus(60)) + moe_flags() +
                     vocab_padding("") + " --bf16";
  base.replace(base.find("--eval-interval 3"), 17, "--eval-interval 0");
  std::string flags = base + " --moe-router-dtype fp32";
  flags.replace(flags.find("--train-iters 6"), 15, "--train-iters 3");
  const RunResult r = run(megatron() + flags + " --save " + save);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json meta = nlohmann::json::parse(read_text(save + "/iter_0000003/meta.json"));
  EXPECT_EQ(meta.at("args").at("model").at("moe_router_dtype"), "fp32");
  const RunResult bad = run(megatron() + base + " --load " + save);
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("the checkpoint's model has --moe-router-dtype fp32 but this run has "
                            "(unset); fix: pass --moe-router-dtype fp32"),
            std::string::npos)
      << bad.output;
}

// A shared expert (a dense MLP every token visits) is TP-split like the dense
// MLP, beside the EP-split routed experts.
TEST(Moe, SharedExpertMatchesOneRank) {
  expect_layouts_match_one_rank(
      moe_flags() + " --moe-shared-expert-intermediate-size 32",
      {{"tp2_sp_ep2", 2,
        " --tensor-model-parallel-size 2 --sequence-parallel"
        " --expert-model-parallel-size 2"},
       {"ep2_dp2", 4, " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"}});
}

TEST(Moe, InterleavedPipelineAndSequenceAuxLossMatchOneRank) {
  expect_layouts_match_one_rank(
      // DeepSeek's form of the pattern (a Python list expression): [0,1,1,1]
      moe_flags(4) + " --moe-router-load-balancing-type seq_aux_loss --moe-layer-freq '[0]*1+[1]*3'",
      {{"vpp_ep2", 4,
        " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
        " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"}});
}

// Full recompute shares scratch records between the groups' layers: with
// MoE and dense layers at the same place of two groups ([1,1,0,0] in groups
// of 2; or the block method's groups of one), each place keeps a record of
// each kind. Recompute changes no number.
TEST(Moe, RecomputeGroupsOfMixedLayerKindsMatchNoRecompute) {
  expect_layouts_match_one_rank(
      moe_flags(4) + " --moe-layer-freq '[1,1,0,0]'",
      {{"recompute_uniform2", 1,
        " --recompute-granularity full --recompute-method uniform --recompute-num-layers 2"},
       // each of the first three layers alone: MoE, MoE, dense at place 0
       {"recompute_block3", 1,
        " --recompute-granularity full --recompute-method block --recompute-num-layers 3"}});
}

// Capacity is computed from each rank's own tokens (as in Megatron), so it is
// layout-independent when each rank holds whole micro-batches: EP x DP.
TEST(Moe, DroppedTokensMatchOneRankAtEp2Dp2) {
  const std::string capacity = " --moe-expert-capacity-factor 0.6 --moe-token-drop-policy probs";
  expect_layouts_match_one_rank(
      moe_flags() + capacity,
      {{"ep2_dp2_a2a", 4, " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall"},
       {"ep2_dp2_ag", 4, " --expert-model-parallel-size 2"},
       // Padding each expert's input to its capacity changes no number.
       {"ep2_dp2_pad", 4, " --expert-model-parallel-size 2 --moe-pad-expert-input-to-capacity"}});
  // The capacity did drop tokens: the losses are not the dropless run's.
  TempDir dir;
  const std::string base = " train" + prepare_data(dir, synthetic_corpus(200)) + moe_flags() +
                           vocab_padding("") + " --train-iters 3 --eval-interval 0";
  const RunResult a = run(megatron() + base + " --log-json " + dir.file("a.json"));
  const RunResult b = run(megatron() + base + capacity + " --log-json " + dir.file("b.json"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const double la = read_log_json(dir.file("a.json")).train.at(3).at("loss").get<double>();
  const double lb = read_log_json(dir.file("b.json")).train.at(3).at("loss").get<double>();
  EXPECT_GT(rel(la, lb), 1e-6) << "a capacity factor of 0.6 dropped nothing";
}

class MoeBadArgs : public BadInputFixture {};

TEST_F(MoeBadArgs, MisfitFlagsAreRefusedInOneLine) {
  const std::string moe = " --num-experts 4 --moe-router-topk 2";
  const BadInputCase cases[] = {
      {"flags without experts", train(" --moe-aux-loss-coeff 0.01"), "without --num-experts"},
      {"top-k above experts", train(" --num-experts 2 --moe-router-topk 3"), "--moe-router-topk 3"},
      {"zero capacity", train(moe + " --moe-expert-capacity-factor 0"),
       "--moe-expert-capacity-factor 0"},
      {"bad drop policy", train(moe + " --moe-token-drop-policy random"),
       "--moe-token-drop-policy 'random'"},
      {"bad dispatcher", train(moe + " --moe-token-dispatcher-type flex"),
       "--moe-token-dispatcher-type 'flex'"},
      {"bad balancing", train(moe + " --moe-router-load-balancing-type sinkhorn"),
       "--moe-router-load-balancing-type 'sinkhorn'"},
      {"bad layer list", train(moe + " --moe-layer-freq '[1,0,1]'"), "--moe-layer-freq '[1,0,1]'"},
      {"expert TP", train(moe + " --expert-tensor-parallel-size 2"),
       "--expert-tensor-parallel-size 2"},
      {"grouped GEMM with biases", train(moe + " --moe-grouped-gemm"),
       "--moe-grouped-gemm with expert biases"},
      {"fp64 router", train(moe + " --moe-router-dtype fp64"),
       "--moe-router-dtype fp64 is not supported by megatron.cpp"},
      {"bf16 router", train(moe + " --moe-router-dtype bf16"), "--moe-router-dtype 'bf16'"},
      {"router dtype without experts", train(" --moe-router-dtype fp32"),
       "without --num-experts"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

TEST_F(MoeBadArgs, MisfitExpertLayoutsAreRefusedByEveryRank) {
  const std::string moe = " --num-experts 3 --moe-router-topk 2";
  for (const auto& [flags, expected] :
       {std::pair<std::string, std::string>{moe + " --expert-model-parallel-size 2",
                                            "--num-experts 3 is not divisible by "
                                            "--expert-model-parallel-size 2"},
        {" --num-experts 4 --expert-model-parallel-size 4", "--expert-model-parallel-size 4"},
        {" --num-experts 4 --tensor-model-parallel-size 2", "needs --sequence-parallel"}}) {
    const RunResult r = run(mpirun(2) + train(flags));
    EXPECT_NE(r.exit_code, 0) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << flags << "\n" << r.output;
  }
}

}  // namespace moe_test
}  // namespace mt::test
