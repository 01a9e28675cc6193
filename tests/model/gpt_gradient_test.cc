// Finite-difference check of the whole model's gradient on a tiny config,
// dropout on (masks are fixed by seed and iteration, so the loss is a smooth
// deterministic function of the weights). Per parameter tensor, the
// directional derivative along a random direction is compared with <grad, u>.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_test_util.h"

namespace mt {
namespace gpt_gradient_test {

ModelConfig tiny_config(bool llama) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 16;
  cfg.num_attention_heads = llama ? 4 : 2;
  cfg.seq_length = 12;
  cfg.vocab_size = 20;
  cfg.make_vocab_size_divisible_by = 8;
  cfg.hidden_dropout = 0.1f;
  cfg.attention_dropout = 0.1f;
  cfg.init_method_std = 0.2f;  // larger weights: non-trivial attention patterns
  if (llama) {  // RMSNorm, RoPE on half of each head, GQA, SwiGLU, no biases, untied
    cfg.normalization = "RMSNorm";
    cfg.position_embedding_type = "rope";
    cfg.rotary_percent = 0.5f;
    cfg.swiglu = true;
    cfg.ffn_hidden_size = 24;
    cfg.group_query_attention = true;
    cfg.num_query_groups = 2;
    cfg.disable_bias_linear = true;
    cfg.untie_embeddings_and_output_weights = true;
  }
  cfg.finalize(1);
  return cfg;
}

void check_gradient_by_finite_differences(const ModelConfig& cfg) {
  const int64_t b = 2;
  TinyGpt m(cfg, b);
  m.reg.initialize(m.params, 42);
  std::mt19937 gen(7);
  std::vector<int32_t> tokens(size_t(b * cfg.seq_length)), labels(tokens.size());
  for (auto& t : tokens) t = int32_t(gen() % 20);
  for (auto& t : labels) t = int32_t(gen() % 20);
  // Perturb the norms and biases away from 1/0 so their gradients are generic.
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const ParamSpec& p : m.reg.params())
    if (p.init != Init::kNormal)
      for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] += nd(gen);

  PassContext ctx;
  ctx.seed = 99;
  ctx.iteration = 3;
  m.zero_grads();
  m.loss(tokens, labels, ctx, true);
  std::vector<float> grad(m.grads, m.grads + m.reg.total_floats());

  for (const ParamSpec& p : m.reg.params()) {
    std::vector<float> u(size_t(p.numel()));
    double gu = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      u[size_t(i)] = nd(gen) * 10.f;  // N(0, 1)
      gu += double(u[size_t(i)]) * grad[size_t(p.offset + i)];
    }
    std::vector<float> saved(m.params + p.offset, m.params + p.offset + p.numel());
    auto loss_at = [&](float step) {
      for (int64_t i = 0; i < p.numel(); ++i)
        m.params[p.offset + i] = saved[size_t(i)] + step * u[size_t(i)];
      return m.loss(tokens, labels, ctx, false);  // training-mode forward: same dropout masks
    };
    auto central = [&](float eps) { return (loss_at(eps) - loss_at(-eps)) / (2.0 * eps); };
    // Richardson extrapolation cancels the O(eps²) term of the central difference.
    const float eps = 4e-3f;
    const double fd = (4.0 * central(eps / 2) - central(eps)) / 3.0;
    for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] = saved[size_t(i)];
    EXPECT_NEAR(gu, fd, 1e-2 * std::abs(fd) + 2e-4) << p.name;
  }
}

TEST(GptGradient, MatchesFiniteDifferencesPerTensor) {
  check_gradient_by_finite_differences(tiny_config(false));
}

TEST(GptGradient, LlamaConfigurationMatchesFiniteDifferencesPerTensor) {
  check_gradient_by_finite_differences(tiny_config(true));
}

// The attention options Qwen2/Qwen3 need: a head size apart from h/a
// (--kv-channels 8 with h 16 and 4 heads: QKV (4 + 2·2)·8 rows, projection
// (16, 32)), the q/k norms of the layer's kind before RoPE (--qk-layernorm;
// their weights' gradient sums every head and token) and a QKV bias without
// the other biases (--add-qkv-bias).
ModelConfig with_attention_options(ModelConfig cfg, bool kv_channels, bool qk_norm,
                                   bool qkv_bias) {
  if (kv_channels) cfg.kv_channels = 8;
  cfg.qk_layernorm = qk_norm;
  cfg.add_qkv_bias = qkv_bias;
  cfg.finalize(1);
  return cfg;
}

TEST(GptGradient, KvChannelsMatchesFiniteDifferencesPerTensor) {
  const ModelConfig cfg = with_attention_options(tiny_config(true), true, false, false);
  ASSERT_EQ(cfg.head_dim(), 8);
  check_gradient_by_finite_differences(cfg);
}

TEST(GptGradient, QkLayernormMatchesFiniteDifferencesPerTensor) {
  for (const char* norm : {"RMSNorm", "LayerNorm"}) {
    ModelConfig cfg = tiny_config(true);
    cfg.normalization = norm;
    check_gradient_by_finite_differences(with_attention_options(cfg, true, true, false));
  }
  // GPT-2's block (learned positions, biases, no GQA) with LayerNorm q/k norms.
  check_gradient_by_finite_differences(with_attention_options(tiny_config(false), false, true,
                                                              false));
}

TEST(GptGradient, AddQkvBiasMatchesFiniteDifferencesPerTensor) {
  const ModelConfig cfg = with_attention_options(tiny_config(true), false, false, true);
  const ParamRegistry reg(cfg, StageLayout{0, 1, 0, cfg.num_layers, true, true});
  EXPECT_TRUE(reg.has("decoder.layers.0.self_attention.linear_qkv.bias"));
  EXPECT_FALSE(reg.has("decoder.layers.0.self_attention.linear_proj.bias"));
  check_gradient_by_finite_differences(cfg);
}

// --apply-layernorm-1p (every norm, the q/k norms too, scales by 1 + weight)
// with --squared-relu: GPT-2's block with LayerNorm, and Llama's with RMSNorm.
TEST(GptGradient, LayerNorm1pAndSquaredReluMatchFiniteDifferencesPerTensor) {
  ModelConfig gpt = tiny_config(false);
  gpt.apply_layernorm_1p = gpt.squared_relu = true;
  check_gradient_by_finite_differences(with_attention_options(gpt, false, true, false));
  ModelConfig llama = tiny_config(true);
  llama.swiglu = false;
  llama.apply_layernorm_1p = llama.squared_relu = true;
  check_gradient_by_finite_differences(with_attention_options(llama, false, true, false));
}

// Multi-latent attention (model/blocks/mla_block.h): a plain q projection
// (DeepSeek-V2-Lite) and the q latent with its norm (V3), the latent norms of
// each kind, YaRN with mscale_all_dim (softmax scale mscale², cos/sin by the
// concentration factor), learned positions beside MLA's own RoPE, biases.
ModelConfig mla_config(int64_t q_lora_rank, const char* norm, bool yarn) {
  ModelConfig cfg = tiny_config(true);
  cfg.group_query_attention = false;
  cfg.rotary_percent = 1.f;
  cfg.normalization = norm;
  cfg.multi_latent_attention = true;
  cfg.q_lora_rank = q_lora_rank;
  cfg.kv_lora_rank = 6;
  cfg.qk_head_dim = 4;
  cfg.qk_pos_emb_head_dim = 4;
  cfg.v_head_dim = 6;
  cfg.qk_layernorm = true;
  cfg.rope_type = yarn ? "yarn" : "rope";
  if (yarn) {
    cfg.rotary_scaling_factor = 4.f;
    cfg.mscale = 0.9f;
    cfg.mscale_all_dim = 0.7f;
    cfg.yarn_original_max_position_embeddings = 6;
  }
  cfg.finalize(1);
  return cfg;
}

TEST(GptGradient, MultiLatentAttentionMatchesFiniteDifferencesPerTensor) {
  const ModelConfig v2 = mla_config(0, "RMSNorm", true);
  const ParamRegistry reg(v2, StageLayout{0, 1, 0, v2.num_layers, true, true});
  const std::string p = "decoder.layers.0.self_attention.";
  EXPECT_TRUE(reg.has(p + "linear_q_proj.weight"));
  EXPECT_FALSE(reg.has(p + "linear_q_down_proj.weight"));
  EXPECT_EQ(reg.get(p + "linear_kv_down_proj.weight").rows, 6 + 4);
  EXPECT_EQ(reg.get(p + "linear_kv_up_proj.weight").rows, 4 * (4 + 6));
  EXPECT_EQ(reg.get(p + "linear_proj.weight").cols, 4 * 6);
  check_gradient_by_finite_differences(v2);
  const ModelConfig v3 = mla_config(5, "LayerNorm", true);
  const ParamRegistry reg3(v3, StageLayout{0, 1, 0, v3.num_layers, true, true});
  EXPECT_EQ(reg3.get(p + "linear_q_up_proj.weight").rows, 4 * (4 + 4));
  EXPECT_TRUE(reg3.has(p + "q_layernorm.bias"));
  check_gradient_by_finite_differences(v3);
  ModelConfig gpt = mla_config(5, "LayerNorm", false);  // learned positions, biases
  gpt.position_embedding_type = "learned_absolute";
  gpt.disable_bias_linear = false;
  gpt.qk_layernorm = false;
  gpt.finalize(1);
  check_gradient_by_finite_differences(gpt);
}

TEST(GptGradient, DropoutChangesLossAndIsKeyedByIteration) {
  ModelConfig cfg;
  cfg.num_layers = 1;
  cfg.hidden_size = 16;
  cfg.num_attention_heads = 2;
  cfg.seq_length = 8;
  cfg.vocab_size = 10;
  cfg.hidden_dropout = 0.2f;
  cfg.attention_dropout = 0.2f;
  cfg.finalize(1);
  TinyGpt m(cfg, 2);
  m.reg.initialize(m.params, 1);
  std::vector<int32_t> tokens(16, 3), labels(16, 4);
  for (int i = 0; i < 16; ++i) tokens[size_t(i)] = i % 10;
  PassContext a, b, c;
  a.iteration = b.iteration = 1;
  c.iteration = 2;
  const double la = m.loss(tokens, labels, a, false), lb = m.loss(tokens, labels, b, false);
  const double lc = m.loss(tokens, labels, c, false);
  PassContext eval;
  eval.training = false;
  const double le = m.loss(tokens, labels, eval, false);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
  EXPECT_NE(la, le);
}

}  // namespace gpt_gradient_test
}  // namespace mt
