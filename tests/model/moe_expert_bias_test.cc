// DeepSeek-V3's routing in an MoE model (sigmoid scores, groups of experts,
// the expert bias): over a few steps, each layer's choices equal a direct
// computation from its logits and the current bias (group-limited top-k of
// sigmoid + bias), the loads the layers report (MoeStats::expert_tokens) are
// the kept choices of that direct computation, and the bias after each step
// is the sum of rate · sign(mean load - load) over the steps; the bias does
// change choices; the weights are the unbiased scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/moe_router.h"
#include "model_test_util.h"

namespace mt {
namespace moe_expert_bias_test {

constexpr int64_t kE = 4, kK = 2, kGroups = 2;  // group top-1: the best pair of experts

ModelConfig biased_config() {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 16;
  cfg.num_attention_heads = 4;
  cfg.seq_length = 12;
  cfg.vocab_size = 20;
  cfg.make_vocab_size_divisible_by = 8;
  cfg.init_method_std = 0.2f;
  cfg.normalization = "RMSNorm";
  cfg.position_embedding_type = "rope";
  cfg.swiglu = true;
  cfg.ffn_hidden_size = 24;
  cfg.disable_bias_linear = true;
  cfg.num_experts = kE;
  cfg.moe_ffn_hidden_size = 20;
  cfg.moe_router_topk = kK;
  cfg.moe_router_score_function = "sigmoid";
  cfg.moe_router_num_groups = kGroups;
  cfg.moe_router_group_topk = 1;
  cfg.moe_router_topk_scaling_factor = 2.5f;
  cfg.moe_router_enable_expert_bias = true;
  cfg.moe_router_bias_update_rate = 0.05f;  // large: the bias moves choices within a few steps
  cfg.moe_router_load_balancing_type = "seq_aux_loss";
  cfg.moe_aux_loss_coeff = 0.01f;
  cfg.finalize(1);
  return cfg;
}

// One token's choice, written out from Megatron's steps: u = sigmoid(z) in
// fp32, key = u + bias (fp32); each group of 2 scored by the sum of its top
// k/g = 2 keys (both); the best group (ties: the lower); its 2 experts by key
// (ties: the lower index). Returns the experts best first.
std::vector<int32_t> direct_choice(const float* z, const float* bias) {
  float key[kE];
  for (int64_t e = 0; e < kE; ++e) key[e] = float(1 / (1 + std::exp(-double(z[e])))) + bias[e];
  const int64_t g = key[2] + key[3] > key[0] + key[1] ? 1 : 0;
  const int32_t a = int32_t(2 * g), b = a + 1;
  return key[b] > key[a] ? std::vector<int32_t>{b, a} : std::vector<int32_t>{a, b};
}

TEST(MoeExpertBias, ChoicesLoadsAndBiasFollowTheDirectComputation) {
  const ModelConfig cfg = biased_config();
  const int64_t b = 2, n = b * cfg.seq_length;
  TinyGpt m(cfg, b);
  m.reg.initialize(m.params, 42);
  std::vector<const ParamSpec*> bias_specs;
  for (const ParamSpec& p : m.reg.params())
    if (p.expert_bias) bias_specs.push_back(&p);
  ASSERT_EQ(bias_specs.size(), 2u);
  EXPECT_EQ(bias_specs[0]->name, "decoder.layers.0.mlp.router.expert_bias");
  std::mt19937 gen(11);
  std::vector<int32_t> tokens(static_cast<size_t>(n)), labels(tokens.size());
  std::vector<float> expected(2 * kE, 0.f);  // each layer's bias, stepped here
  int64_t moved = 0;                         // choices the bias changed
  for (int step = 0; step < 6; ++step) {
    for (auto& t : tokens) t = int32_t(gen() % 20);
    for (auto& t : labels) t = int32_t(gen() % 20);
    MoeStats stats;
    stats.expert_tokens.assign(size_t(cfg.num_layers * kE), 0.0);
    PassContext ctx;
    ctx.moe_stats = &stats;
    m.loss(tokens, labels, ctx, false);
    for (int64_t l = 0; l < 2; ++l) {
      const MoeRecord& rec = std::get<MoeRecord>(m.rt.slots()[0].act.layers[size_t(l)].mlp);
      const float* bias = m.params + bias_specs[size_t(l)]->offset;
      for (int64_t e = 0; e < kE; ++e) ASSERT_EQ(bias[e], expected[size_t(l * kE + e)]) << step;
      std::vector<double> load(kE, 0.0);
      const std::vector<float> zero(kE, 0.f);
      for (int64_t t = 0; t < n; ++t) {
        const float* z = rec.logits + t * kE;
        const std::vector<int32_t> want = direct_choice(z, bias);
        moved += want != direct_choice(z, zero.data());
        double sum = 1e-20;
        for (int32_t e : want) sum += rec.scores[t * kE + e];
        for (int64_t j = 0; j < kK; ++j) {
          ASSERT_EQ(rec.expert[t * kK + j], want[size_t(j)]) << "step " << step << " token " << t;
          // The weight: the unbiased score over the chosen's, times the factor.
          EXPECT_NEAR(rec.prob[t * kK + j], 2.5 * rec.scores[t * kE + want[size_t(j)]] / sum,
                      1e-6);
          load[size_t(want[size_t(j)])] += 1;
        }
      }
      double mean = 0;
      for (int64_t e = 0; e < kE; ++e) {
        EXPECT_EQ(stats.expert_tokens[size_t(l * kE + e)], load[size_t(e)]) << "step " << step;
        mean += load[size_t(e)] / kE;
      }
      // Megatron's get_updated_expert_bias, as the trainer applies it.
      for (int64_t e = 0; e < kE; ++e)
        expected[size_t(l * kE + e)] += load[e] < mean ? 0.05f : load[e] > mean ? -0.05f : 0.f;
      moe_expert_bias_update(m.params + bias_specs[size_t(l)]->offset,
                             stats.expert_tokens.data() + l * kE, kE,
                             cfg.moe_router_bias_update_rate);
    }
  }
  EXPECT_GT(moved, 0) << "the bias never changed a choice: the test checks little";
  // Evaluation (training false) counts nothing.
  MoeStats eval;
  eval.expert_tokens.assign(size_t(cfg.num_layers * kE), 0.0);
  PassContext ctx;
  ctx.training = false;
  ctx.moe_stats = &eval;
  m.loss(tokens, labels, ctx, false);
  for (double c : eval.expert_tokens) EXPECT_EQ(c, 0.0);
}

}  // namespace moe_expert_bias_test
}  // namespace mt
