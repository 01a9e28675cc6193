// Multi-latent attention (--multi-latent-attention, model/blocks/mla_block.h)
// trains equal to one rank under TP, TP x SP and CP (and PP, ZeRO with full
// recompute): DeepSeek-V2-Lite's shape (a plain q projection, plain RoPE,
// LayerNorm latents, biases) and V3's (the q latent, YaRN with mscale, RMSNorm
// latents), in fp32 and bf16; YaRN on the standard attention too. A
// checkpoint saved at TP 2 resumes at TP 1 as at TP 2 (its heads' rows
// re-sharded, the replicated down-projections taken once); `generate` says
// its cache bytes per token; what it does not build is refused by name.
#include <cmath>
#include <cstdio>

#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace mla_test {

const std::string kBase =
    " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
    " --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3"
    " --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1"
    " --clip-grad 1.0 --split 90,10,0 --peak-tflops 1 --log-interval 1 --swiglu"
    " --ffn-hidden-size 64 --hidden-dropout 0.1 --attention-dropout 0.1 --init-method-std 0.2"
    " --train-iters 6 --eval-interval 3 --eval-iters 1 --multi-latent-attention"
    " --kv-lora-rank 8 --qk-head-dim 8 --qk-pos-emb-head-dim 4 --v-head-dim 6";
// DeepSeek-V2-Lite's shape.
const std::string kV2Lite =
    kBase + " --rope-type rope --qk-layernorm --position-embedding-type rope";
// V3's: the q latent, YaRN (factor 4 over 16 original positions), RMSNorm.
const std::string kV3 = kBase +
                        " --q-lora-rank 12 --qk-layernorm --normalization RMSNorm"
                        " --disable-bias-linear --position-embedding-type rope"
                        " --rotary-scaling-factor 4 --mscale 0.9 --mscale-all-dim 0.7"
                        " --yarn-original-max-position-embeddings 16";

const std::vector<Layout> kLayouts = {
    {"tp2", 2, " --tensor-model-parallel-size 2"},
    {"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
    {"cp2", 2, " --context-parallel-size 2"}};

TEST(MultiLatentAttention, V2LiteShapeLayoutsMatchOneRank) {
  expect_layouts_match_one_rank(kV2Lite, kLayouts, 1e-5, {"loss"}, "MLA, V2-Lite's shape");
}

// V3's also with PP and with the distributed optimizer over DP (the
// replicated down-projections are plain parameters of the buckets), and with
// full recompute (the block's forward re-run from the layer's input).
TEST(MultiLatentAttention, V3ShapeWithYarnLayoutsMatchOneRank) {
  std::vector<Layout> layouts = kLayouts;
  layouts.push_back({"pp2", 2, " --pipeline-model-parallel-size 2"});
  layouts.push_back({"dp2_zero_recompute", 2,
                     " --use-distributed-optimizer --recompute-granularity full"
                     " --recompute-method uniform --recompute-num-layers 1"});
  expect_layouts_match_one_rank(kV3, layouts, 1e-5, {"loss"}, "MLA, V3's shape with YaRN");
}

// bf16 (its GEMMs, saved latents, q, k, v and projection input) at the
// init of the other bf16 layout tests (0.02; rope_scaling_test.cc says why).
TEST(MultiLatentAttention, Bf16LayoutsMatchOneRank) {
  std::string model = kV3 + " --bf16";
  model.replace(model.find("--init-method-std 0.2"), 21, "--init-method-std 0.02");
  expect_layouts_match_one_rank(model, {kLayouts[1], kLayouts[2]}, 1e-4, {"loss"}, "MLA, bf16");
}

// --position-embedding-type yarn on the standard attention (Megatron's
// YarnRotaryEmbedding in GPTModel): its table, scaled cos/sin, equal at TP x SP and CP.
TEST(MultiLatentAttention, StandardAttentionYarnLayoutsMatchOneRank) {
  std::string model = kV3;
  model.replace(model.find(" --multi-latent-attention"), 25, "");
  const std::string sizes =
      " --kv-lora-rank 8 --qk-head-dim 8 --qk-pos-emb-head-dim 4 --v-head-dim 6 --q-lora-rank 12";
  model.replace(model.find(sizes), sizes.size(), "");
  model.replace(model.find("--position-embedding-type rope"), 30, "--position-embedding-type yarn");
  expect_layouts_match_one_rank(model, {kLayouts[1], kLayouts[2]}, 1e-5, {"loss"},
                                "standard attention with YaRN");
}

// Iterations 4..6 from a TP 2 checkpoint of iteration 3: at TP 1 as at TP 2.
TEST(MultiLatentAttention, CheckpointOfTp2ResumesAtTp1AndGenerates) {
  TempDir dir;
  std::string flags = " train" + prepare_data(dir, synthetic_corpus(100)) + kV3 +
                      " --make-vocab-size-divisible-by 32";
  flags.replace(flags.find("--eval-interval 3"), 17, "--eval-interval 0");
  const std::string save = dir.file("ckpt");
  const RunResult a = run(mpirun(2) + flags + " --tensor-model-parallel-size 2 --exit-interval 3"
                          " --save " + save);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const RunResult b = run(mpirun(2) + flags + " --tensor-model-parallel-size 2 --load " + save +
                          " --log-json " + dir.file("tp2.json"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const RunResult c = run(megatron() + flags + " --load " + save + " --log-json " +
                          dir.file("tp1.json"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const JsonLogLines l2 = read_log_json(dir.file("tp2.json"));
  const JsonLogLines l1 = read_log_json(dir.file("tp1.json"));
  ASSERT_EQ(l1.train.size(), 3u);
  ASSERT_EQ(l2.train.size(), 3u);
  for (const auto& [it, j] : l2.train)
    EXPECT_LT(rel(j.at("loss").get<double>(), l1.train.at(it).at("loss").get<double>()), 1e-5)
        << "iteration " << it;
  // The decoder's cache: the latent and the RoPE key, (8 + 4) floats a layer.
  const RunResult g = run(megatron() + " generate --load " + save +
                          " --prompt 'the' --max-new-tokens 4 --temperature 0");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_NE(g.output.find("96 bytes a token"), std::string::npos) << g.output;
}

TEST(MultiLatentAttention, WhatIsNotBuiltIsRefusedByName) {
  TempDir dir;
  const std::string train = " train" + prepare_data(dir, synthetic_corpus(40));
  auto refused = [&](const std::string& launch, const std::string& extra,
                     const std::string& says) {
    const RunResult r = run(launch + train + kV3 + extra);
    EXPECT_NE(r.exit_code, 0) << extra;
    EXPECT_NE(r.output.find(says), std::string::npos) << extra << "\n" << r.output;
  };
  refused(megatron(), " --group-query-attention --num-query-groups 2",
          "--group-query-attention with --multi-latent-attention");
  refused(megatron(), " --v-head-dim 20", "--v-head-dim 20 is over the query/key head size");
  refused(megatron(), " --rope-type ntk", "--rope-type 'ntk' is not one of rope, yarn");
  refused(mpirun(2), " --num-attention-heads 1 --tensor-model-parallel-size 2",
          "--num-attention-heads");
  std::string plain = kV3;
  plain.replace(plain.find(" --multi-latent-attention"), 25, "");
  const RunResult r = run(megatron() + train + plain);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("without --multi-latent-attention"), std::string::npos) << r.output;
}

}  // namespace mla_test
}  // namespace mt::test
