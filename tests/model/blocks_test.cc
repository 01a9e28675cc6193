// The blocks of a layer (model/blocks) each bring their own numbers: every
// block's memory formula agrees with what its carve plans (up to the 64-byte
// alignment of each tensor), the layer's are the sums over its blocks, its
// FLOPs are the blocks' sum, and a layer's parameters are its blocks' in order.
#include "model/blocks/transformer_layer.h"

#include <gtest/gtest.h>

#include <string>

namespace mt {
namespace {

// llama: RMSNorm, SwiGLU and 2 query groups for the 4 heads.
GptShapes shapes(int64_t tp, bool sp, bool llama, MathMode math) {
  GptShapes sh;
  sh.s = sh.s_global = 96, sh.b = 2, sh.h = 64;
  sh.s_local = sp ? sh.s / tp : sh.s;
  sh.a = 4 / tp, sh.d = 16;
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
  for (bool llama : {false, true})
    for (MathMode math : {MathMode::kF32, MathMode::kBF16})
      for (int64_t tp : {1, 2}) {
        const GptShapes sh = shapes(tp, tp > 1, llama, math);
        const BlockSizes z = sizes_of(sh);
        const std::string what = std::string(llama ? "llama " : "gpt ") + math_mode_name(math) +
                                 " tp " + std::to_string(tp);
        const struct {
          const char* block;
          double planned, formula;
          int tensors;
        } rows[] = {
            {"norm record", carved([&](Arena& a) { carve_norm_record(a, sh); }),
             norm_record_bytes(z), 3},
            {"attention record", carved([&](Arena& a) { carve_attention_record(a, sh); }),
             attention_record_bytes(z), 6},
            {"attention workspace", carved([&](Arena& a) { carve_attention_workspace(a, sh); }),
             attention_workspace_bytes(z), 7},
            {"mlp record", carved([&](Arena& a) { carve_mlp_record(a, sh); }),
             mlp_record_bytes(z), 2},
            {"mlp workspace", carved([&](Arena& a) { carve_mlp_workspace(a, sh); }),
             mlp_workspace_bytes(z), 2},
            {"layer record", carved([&](Arena& a) { carve_layer_record(a, sh, LayerSpec{}); }),
             layer_record_bytes(z, LayerSpec{}), 15},
            {"layer workspace", carved([&](Arena& a) { carve_layer_workspace(a, sh); }),
             layer_workspace_bytes(z), 9},
        };
        for (const auto& r : rows) {
          EXPECT_GE(r.planned, r.formula) << r.block << ", " << what;
          EXPECT_LE(r.planned, r.formula + 64.0 * r.tensors) << r.block << ", " << what;
        }
      }
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
}

}  // namespace
}  // namespace mt
