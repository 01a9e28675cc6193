// The blocks of a layer (model/blocks) each bring their own numbers: every
// block's memory formula agrees with what its carve plans (up to the 64-byte
// alignment of each tensor), the layer's are the sums over its blocks, its
// FLOPs are the blocks' sum, and a layer's parameters are its blocks' in order.
#include "model/blocks/transformer_layer.h"
#include "model/gpt.h"

#include <gtest/gtest.h>

#include <string>

namespace mt {
namespace blocks_test {

// llama: RMSNorm, SwiGLU and 2 query groups for the 4 heads.
// qwen: llama's block with the head size 24 apart from h/a = 16
// (--kv-channels) and the q/k norms (--qk-layernorm).
GptShapes shapes(int64_t tp, bool sp, bool llama, MathMode math, bool qwen = false) {
  GptShapes sh;
  sh.s = sh.s_global = 96, sh.b = 2, sh.h = 64;
  sh.s_local = sp ? sh.s / tp : sh.s;
  sh.a = 4 / tp, sh.d = qwen ? 24 : 16;
  sh.qk_layernorm = qwen;
  sh.g = llama ? 2 / tp : sh.a;
  sh.f = 256 / tp;
  sh.rms_norm = sh.swiglu = llama;
  sh.f_in = llama ? 2 * sh.f : sh.f;
  sh.cm.math = math;
  return sh;
}

BlockSizes sizes_of(const GptShapes& sh) {
  BlockSizes z;
  z.n = double(sh.tokens()), z.nl = double(sh.local_tokens()), z.h = double(sh.h);
  z.hl = double(sh.a * sh.d), z.a = double(sh.a), z.g = double(sh.g);
  z.f = double(sh.f), z.f_in = double(sh.f_in);
  z.stats = sh.rms_norm ? 1 : 2;
  z.bf16 = sh.cm.math == MathMode::kBF16;
  z.e = z.bf16 ? 2 : 4;
  z.swiglu = sh.swiglu;
  z.qk_norm = sh.qk_layernorm;
  z.b = sh.b, z.kv = sh.s, z.cp = 1;
  return z;
}

// Bytes a carve function plans (a counting arena).
template <class F>
double carved(F carve) {
  Arena a;
  carve(a);
  return double(a.used());
}

TEST(Blocks, EachMemoryFormulaAgreesWithItsCarve) {
  for (int kind : {0, 1, 2, 3})  // gpt, llama, qwen (llama's), gpt with q/k LayerNorms
    for (MathMode math : {MathMode::kF32, MathMode::kBF16})
      for (int64_t tp : {1, 2}) {
        const bool llama = kind == 1 || kind == 2, qwen = kind >= 2;
        const GptShapes sh = shapes(tp, tp > 1, llama, math, qwen);
        const BlockSizes z = sizes_of(sh);
        const std::string what = std::string(kind == 0   ? "gpt "
                                             : kind == 1 ? "llama "
                                             : kind == 2 ? "qwen "
                                                         : "gpt q/k-norm ") +
                                 math_mode_name(math) + " tp " + std::to_string(tp);
        const int qk_tensors = qwen ? (sh.rms_norm ? 4 : 6) : 0;
        LayerSpec norms;  // --recompute-modules layernorm: the norms' outputs in the workspace
        norms.recompute_norms = true;
        GptShapes sh_norms = sh;
        sh_norms.layer_specs = {norms};
        const struct {
          const char* block;
          double planned, formula;
          int tensors;
        } rows[] = {
            {"norm record", carved([&](Arena& a) { carve_norm_record(a, sh); }),
             norm_record_bytes(z), 3},
            {"attention record", carved([&](Arena& a) { carve_attention_record(a, sh); }),
             attention_record_bytes(z), 6 + qk_tensors},
            {"attention workspace", carved([&](Arena& a) { carve_attention_workspace(a, sh); }),
             attention_workspace_bytes(z), 7},
            {"mlp record", carved([&](Arena& a) { carve_mlp_record(a, sh); }),
             mlp_record_bytes(z), 2},
            {"mlp workspace", carved([&](Arena& a) { carve_mlp_workspace(a, sh); }),
             mlp_workspace_bytes(z), 2},
            {"layer record", carved([&](Arena& a) { carve_layer_record(a, sh, LayerSpec{}); }),
             layer_record_bytes(z, LayerSpec{}), 15 + qk_tensors},
            {"layer workspace", carved([&](Arena& a) { carve_layer_workspace(a, sh); }),
             layer_workspace_bytes(z, {}), 9},
            {"layer record, norms recomputed",
             carved([&](Arena& a) { carve_layer_record(a, sh, norms); }),
             layer_record_bytes(z, norms), 13 + qk_tensors},
            {"layer workspace, norms recomputed",
             carved([&](Arena& a) { carve_layer_workspace(a, sh_norms); }),
             layer_workspace_bytes(z, {norms}), 10},
        };
        for (const auto& r : rows) {
          EXPECT_GE(r.planned, r.formula) << r.block << ", " << what;
          EXPECT_LE(r.planned, r.formula + 64.0 * r.tensors) << r.block << ", " << what;
        }
        // Recomputed norms leave two outputs of the record for one in the workspace.
        EXPECT_NEAR(layer_record_bytes(z, LayerSpec{}) - layer_record_bytes(z, norms),
                    2 * z.e * z.nl * z.h, 1e-6) << what;
        if (qwen) {  // the q/k norms' inputs and statistics are in the record and its formula
          GptShapes plain = sh;
          plain.qk_layernorm = false;
          const double extra = carved([&](Arena& a) { carve_attention_record(a, sh); }) -
                               carved([&](Arena& a) { carve_attention_record(a, plain); });
          const double n = double(sh.tokens()), e = z.e;
          EXPECT_NEAR(extra, 2 * e * n * sh.a * sh.d + 4 * 2 * z.stats * n * sh.a,
                      64.0 * qk_tensors) << what;
        }
      }
}

// Multi-latent attention (model/blocks/mla_block.h) brings the same numbers:
// its record and workspace formulas agree with their carves (TP 1 and 2, each
// norm kind, with and without the q latent), its FLOPs are Megatron-LM's
// MLA count, its parameters Megatron core's names in order and the count's.
TEST(Blocks, MultiLatentAttentionFormulasNamesAndFlops) {
  for (int64_t q_lora_rank : {0, 12})
    for (const char* norm : {"RMSNorm", "LayerNorm"})
      for (int64_t tp : {1, 2})
        for (MathMode math : {MathMode::kF32, MathMode::kBF16}) {
        ModelConfig c;
        c.num_layers = 2, c.hidden_size = 32, c.num_attention_heads = 4, c.seq_length = 48;
        c.vocab_size = 65, c.normalization = norm, c.multi_latent_attention = true;
        c.q_lora_rank = q_lora_rank, c.kv_lora_rank = 8, c.qk_head_dim = 8;
        c.qk_pos_emb_head_dim = 4, c.v_head_dim = 6, c.qk_layernorm = true;
        c.finalize(tp);
        const ParamRegistry reg(c, StageLayout{0, 1, 0, c.num_layers, true, true});
        GptShapes sh = make_shapes(reg, 2);
        sh.cm.math = math;
        if (tp > 1) {  // a rank of TP 2: its heads (no group needed for the carves)
          sh.a = sh.g = 4 / tp;
          sh.kinds = make_kind_shapes(c, StageLayout{0, tp, 0, c.num_layers, true, true}, sh,
                                      nullptr);
        }
        ASSERT_EQ(sh.spec(0).attention, AttentionKinds::index_of<MultiLatentAttention>());
        BlockSizes z = sizes_of(sh);
        z.stats = sh.rms_norm ? 1 : 2;
        z.kinds = sh.kinds.get();
        const std::string what = std::string(norm) + " q rank " + std::to_string(q_lora_rank) +
                                 " tp " + std::to_string(tp) + " " + math_mode_name(math);
        const double record = carved([&](Arena& a) { carve_mla_record(a, sh); });
        const double workspace = carved([&](Arena& a) { carve_mla_workspace(a, sh); });
        EXPECT_GE(record, mla_record_bytes(z)) << what;
        EXPECT_LE(record, mla_record_bytes(z) + 64.0 * 14) << what;
        EXPECT_GE(workspace, mla_workspace_bytes(z)) << what;
        EXPECT_LE(workspace, mla_workspace_bytes(z) + 64.0 * 11) << what;
        // --recompute-modules mla_up_proj: q, k, v leave the record (k_pe
        // joins it) for one set in the workspace; the kind's formulas read
        // the layer's spec.
        GptShapes up = sh;
        for (LayerSpec& s : up.layer_specs) s.recompute_up_proj = true;
        const double record_up = carved([&](Arena& a) { carve_mla_record(a, up, true); });
        const double workspace_up = carved([&](Arena& a) { carve_mla_workspace(a, up); });
        EXPECT_GE(record_up, mla_record_bytes(z, true)) << what;
        EXPECT_LE(record_up, mla_record_bytes(z, true) + 64.0 * 12) << what;
        EXPECT_GE(workspace_up, mla_workspace_bytes(z, true)) << what;
        EXPECT_LE(workspace_up, mla_workspace_bytes(z, true) + 64.0 * 14) << what;
        EXPECT_DOUBLE_EQ(MultiLatentAttention::record_bytes(z, up.spec(0)),
                         mla_record_bytes(z, true)) << what;
        EXPECT_DOUBLE_EQ(MultiLatentAttention::workspace_bytes(z, up.layer_specs),
                         mla_workspace_bytes(z, true)) << what;
        const double heads = double(mla_of(sh).a), nq = double(sh.tokens());
        const double qkv = z.e * nq * heads * (2 * 12 + 6);  // q, k (dq = 12), v (dv = 6)
        EXPECT_NEAR(mla_record_bytes(z) - mla_record_bytes(z, true), qkv - 4 * nq * 4, 1e-6)
            << what;
        EXPECT_NEAR(mla_workspace_bytes(z, true) - mla_workspace_bytes(z), qkv, 1e-6) << what;
        int64_t n = 0;
        for (const ParamSpec& p : reg.params()) n += p.global_rows * p.global_cols;
        EXPECT_EQ(count_parameters(c), n) << what;
      }
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 32, c.num_attention_heads = 4, c.seq_length = 48;
  c.vocab_size = 65, c.multi_latent_attention = true, c.q_lora_rank = 12, c.kv_lora_rank = 8;
  c.qk_head_dim = 8, c.qk_pos_emb_head_dim = 4, c.v_head_dim = 6, c.qk_layernorm = true;
  c.normalization = "RMSNorm", c.disable_bias_linear = true;
  c.finalize(1);
  // 6·tokens·(q latent + kv latent + k_pe + projection) + 6·tokens·s·(a·dq + a·dv)/2.
  const double tokens = 96, h = 32, a = 4, s = 48;
  const double linear = 12 * (h + a * 12 + 1) + 8 * (h + a * (8 + 6) + 1) + h * 4 + a * 6 * h;
  EXPECT_DOUBLE_EQ(mla_flops(c, tokens), 6 * tokens * (linear + s * (a * 12 + a * 6) / 2));
  EXPECT_DOUBLE_EQ(layer_flops(c, 0, tokens), mla_flops(c, tokens) + mlp_flops(c, tokens));
  const ParamRegistry reg(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  std::vector<std::string> names;
  for (const ParamSpec& p : reg.params())
    if (p.layer == 1 && p.name.find("self_attention") != std::string::npos)
      names.push_back(p.name.substr(layer_prefix(1).size() + 15));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "linear_q_down_proj.weight", "q_layernorm.weight",
                       "linear_q_up_proj.weight", "linear_kv_down_proj.weight",
                       "kv_layernorm.weight", "linear_kv_up_proj.weight", "linear_proj.weight"}));
  const std::string p = layer_prefix(1) + "self_attention.";
  // TP: the up-projections split their rows (heads), linear_proj its
  // columns; the down-projections and norms are replicated with their
  // gradients summed over TP.
  EXPECT_EQ(reg.get(p + "linear_q_up_proj.weight").partition_dim, 0);
  EXPECT_EQ(reg.get(p + "linear_kv_up_proj.weight").partition_dim, 0);
  EXPECT_EQ(reg.get(p + "linear_proj.weight").partition_dim, 1);
  for (const char* r : {"linear_q_down_proj.weight", "linear_kv_down_proj.weight",
                        "q_layernorm.weight", "kv_layernorm.weight"}) {
    EXPECT_TRUE(reg.get(p + r).tp_replicated()) << r;
    EXPECT_TRUE(reg.get(p + r).tp_partial_grad) << r;
  }
}

TEST(Blocks, AttentionFlopsScaleWithTheQueryProjection) {
  // Megatron-LM's num_floating_point_operations with --kv-channels: the
  // attention term times query_projection_size / h = a·d / h.
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 64, c.num_attention_heads = 4, c.seq_length = 32;
  c.vocab_size = 100, c.group_query_attention = true, c.num_query_groups = 2;
  c.kv_channels = 32;  // a·d = 128 = 2h
  c.finalize(1);
  const double tokens = 8.0 * 32, h = 64;
  EXPECT_DOUBLE_EQ(attention_flops(c, tokens),
                   12 * tokens * h * h * (1 + 0.5 + 32 / h / 2) * (4.0 * 32 / h));
}

TEST(Blocks, LayerFlopsAreTheBlocksSum) {
  ModelConfig c;
  c.num_layers = 4, c.hidden_size = 64, c.num_attention_heads = 4, c.seq_length = 32;
  c.vocab_size = 100, c.swiglu = true;
  c.finalize(1);
  const double tokens = 8.0 * 32;
  EXPECT_DOUBLE_EQ(layer_flops(c, 2, tokens), attention_flops(c, tokens) + mlp_flops(c, tokens));
  // Megatron-LM's terms: 12·tokens·h² · (1 + groups + s/2h) and · (1.5 · f/h) gated.
  const double h = 64, f = double(c.ffn_hidden_size);
  EXPECT_DOUBLE_EQ(attention_flops(c, tokens), 12 * tokens * h * h * (1 + 1 + 32 / h / 2));
  EXPECT_DOUBLE_EQ(mlp_flops(c, tokens), 12 * tokens * h * h * (f / h * 1.5));
}

TEST(Blocks, ALayersParametersAreItsBlocksInOrder) {
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 32, c.num_attention_heads = 4, c.seq_length = 16;
  c.vocab_size = 65;
  c.finalize(1);
  const ParamRegistry reg(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  std::vector<std::string> names;
  for (const ParamSpec& p : reg.params())
    if (p.layer == 1) names.push_back(p.name.substr(layer_prefix(1).size()));
  const std::vector<std::string> want = {
      "input_layernorm.weight", "input_layernorm.bias", "self_attention.linear_qkv.weight",
      "self_attention.linear_qkv.bias", "self_attention.linear_proj.weight",
      "self_attention.linear_proj.bias", "pre_mlp_layernorm.weight", "pre_mlp_layernorm.bias",
      "mlp.linear_fc1.weight", "mlp.linear_fc1.bias", "mlp.linear_fc2.weight",
      "mlp.linear_fc2.bias"};
  EXPECT_EQ(names, want);

  // Qwen2's and Qwen3's attention options: the QKV bias alone, and the q/k
  // norms (Megatron core's names; LayerNorm ones have a bias); the projection
  // takes a·d = 4·12 columns with --kv-channels 12.
  c.disable_bias_linear = true, c.add_qkv_bias = true, c.qk_layernorm = true;
  c.kv_channels = 12;
  c.finalize(1);
  const ParamRegistry qwen(c, StageLayout{0, 1, 0, c.num_layers, true, true});
  names.clear();
  for (const ParamSpec& p : qwen.params())
    if (p.layer == 1 && p.name.find("self_attention") != std::string::npos)
      names.push_back(p.name.substr(layer_prefix(1).size()));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
                       "self_attention.q_layernorm.weight", "self_attention.q_layernorm.bias",
                       "self_attention.k_layernorm.weight", "self_attention.k_layernorm.bias",
                       "self_attention.linear_proj.weight"}));
  const ParamSpec& qkv = qwen.get(layer_prefix(1) + "self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.global_rows, (4 + 2 * 4) * 12);
  const ParamSpec& proj = qwen.get(layer_prefix(1) + "self_attention.linear_proj.weight");
  EXPECT_EQ(proj.global_rows, 32);
  EXPECT_EQ(proj.global_cols, 4 * 12);
  const ParamSpec& qn = qwen.get(layer_prefix(1) + "self_attention.q_layernorm.weight");
  EXPECT_EQ(qn.global_rows, 12);
  EXPECT_TRUE(qn.tp_replicated());
  EXPECT_TRUE(qn.tp_partial_grad);
  EXPECT_FALSE(qwen.get(layer_prefix(1) + "input_layernorm.weight").tp_partial_grad);
  EXPECT_EQ(count_parameters(c), [&] {
    int64_t n = 0;
    for (const ParamSpec& p : qwen.params()) n += p.numel();
    return n;
  }());
}

}  // namespace blocks_test
}  // namespace mt

namespace mt {
namespace blocks_test {

// The registry (model/blocks/block_kinds.h): each slot's first kind is the
// default, a layer takes the first later kind that picks it, and names are
// distinct within a slot.
TEST(BlockKinds, LayersTakeTheKindTheirConfigurationPicks) {
  ModelConfig c;
  c.num_layers = 4;
  c.num_experts = 4;
  c.moe_layer_freq = "[1,1,0,0]";
  const size_t moe = MlpKinds::index_of<MoeMlp>(), dense = MlpKinds::index_of<DenseMlp>();
  EXPECT_EQ(dense, 0u);
  for (int64_t l = 0; l < 4; ++l) {
    EXPECT_EQ(layer_spec(c, l).mlp, l < 2 ? moe : dense) << "layer " << l;
    EXPECT_EQ(layer_spec(c, l).attention, AttentionKinds::index_of<SelfAttention>());
  }
  EXPECT_TRUE(model_uses_mlp(c, moe));
  EXPECT_TRUE(model_uses_mlp(c, dense));
  c.num_experts = 0;
  EXPECT_FALSE(model_uses_mlp(c, moe));
  std::vector<std::string> names;
  for_each_kind<MlpKinds>([&](auto k) { names.push_back(decltype(k)::type::name); });
  EXPECT_EQ(names, (std::vector<std::string>{"dense", "moe", "registered"}));
  // --mlp-kind: the dense layers take the registered block, the MoE layers keep theirs.
  c.num_experts = 4;
  c.mlp_kind = "some_block";
  for (int64_t l = 0; l < 4; ++l)
    EXPECT_EQ(layer_spec(c, l).mlp, l < 2 ? moe : MlpKinds::index_of<RegisteredMlp>())
        << "layer " << l;
}

// Recomputed layers share scratch records: one per place in a group and kind
// there, so a dense layer never reuses an MoE layer's record.
TEST(BlockKinds, RecomputeScratchHasARecordPerPlaceAndKind) {
  const LayerSpec moe{0, uint8_t(MlpKinds::index_of<MoeMlp>())}, dense{};
  GptShapes sh;
  sh.num_layers = 4;
  sh.layer_specs = {moe, moe, dense, dense};
  set_full_recompute(sh, "uniform", 2);  // groups {0, 1}, {2, 3}
  LayerRecords r = layer_records(sh);
  EXPECT_TRUE(r.kept.empty());
  EXPECT_EQ(r.scratch, (std::vector<LayerSpec>{moe, moe, dense, dense}));
  EXPECT_EQ(r.scratch_of, (std::vector<int64_t>{0, 1, 2, 3}));
  sh.layer_specs = {moe, dense, moe, dense};  // the same kind at each place: 2 records
  r = layer_records(sh);
  EXPECT_EQ(r.scratch, (std::vector<LayerSpec>{moe, dense}));
  EXPECT_EQ(r.scratch_of, (std::vector<int64_t>{0, 1, 0, 1}));
  set_full_recompute(sh, "block", 3);  // layers 0-2 alone, layer 3 kept
  r = layer_records(sh);
  EXPECT_EQ(r.kept, (std::vector<LayerSpec>{dense}));
  EXPECT_EQ(r.scratch, (std::vector<LayerSpec>{moe, dense}));
  EXPECT_EQ(r.scratch_of, (std::vector<int64_t>{0, 1, 0, -1}));
}

}  // namespace blocks_test
}  // namespace mt
