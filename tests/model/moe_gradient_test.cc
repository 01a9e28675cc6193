// Finite-difference check of an MoE model's gradient (issue 29): the
// objective is the token loss plus the router's load-balancing and z losses
// (as their gradients are injected in backward, aux_loss_scale 1), per
// parameter tensor along a random direction, dropout on. The top-k choices
// and the expert counts are piecewise constant: each tensor's step is halved
// until no choice flips (a few tensors may flip at every step: skipped).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/moe_router.h"
#include "model_test_util.h"

namespace mt {
namespace moe_gradient_test {

ModelConfig moe_config(const std::string& balancing, bool pre_softmax, double capacity,
                       int64_t shared = 0, bool grouped = false) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 16;
  cfg.num_attention_heads = 4;
  cfg.seq_length = 12;
  cfg.vocab_size = 20;
  cfg.make_vocab_size_divisible_by = 8;
  cfg.hidden_dropout = 0.1f;
  cfg.attention_dropout = 0.1f;
  cfg.init_method_std = 0.2f;
  cfg.normalization = "RMSNorm";
  cfg.position_embedding_type = "rope";
  cfg.swiglu = true;
  cfg.ffn_hidden_size = 24;
  cfg.disable_bias_linear = true;
  cfg.num_experts = 4;
  cfg.moe_ffn_hidden_size = 20;
  cfg.moe_layer_freq = "[1,1]";
  cfg.moe_router_topk = 2;
  cfg.moe_router_pre_softmax = pre_softmax;
  cfg.moe_router_load_balancing_type = balancing;
  cfg.moe_aux_loss_coeff = 0.5f;  // large: its gradient must show
  cfg.moe_z_loss_coeff = 0.05f;
  cfg.moe_expert_capacity_factor = float(capacity);
  cfg.moe_shared_expert_intermediate_size = shared;
  cfg.moe_grouped_gemm = grouped;
  cfg.finalize(1);
  return cfg;
}

void check_moe_gradient(const ModelConfig& cfg) {
  const int64_t b = 2;
  TinyGpt m(cfg, b);
  m.reg.initialize(m.params, 42);
  std::mt19937 gen(7);
  std::vector<int32_t> tokens(size_t(b * cfg.seq_length)), labels(tokens.size());
  for (auto& t : tokens) t = int32_t(gen() % 20);
  for (auto& t : labels) t = int32_t(gen() % 20);
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const ParamSpec& p : m.reg.params())
    if (p.init != Init::kNormal)
      for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] += nd(gen);
  PassContext ctx;
  ctx.seed = 99;
  ctx.iteration = 3;
  // Token loss + coefficients x the router losses MoeStats collects.
  auto objective = [&](bool backward) {
    MoeStats stats;
    ctx.moe_stats = &stats;
    const double lm = m.loss(tokens, labels, ctx, backward);
    EXPECT_EQ(stats.layer_passes, 2);
    return lm + cfg.moe_aux_loss_coeff * stats.load_balancing_loss +
           cfg.moe_z_loss_coeff * stats.z_loss;
  };
  m.zero_grads();
  objective(true);
  std::vector<float> grad(m.grads, m.grads + m.reg.total_floats());
  // Every kept choice of both layers (-1 where dropped), and the plain top-k
  // the load-balancing loss counts (another choice with groups or a bias):
  // the routing.
  auto routing = [&] {
    std::vector<int32_t> r;
    const int64_t pairs = b * cfg.seq_length * cfg.moe_router_topk;
    for (const LayerActivations& la : m.rt.slots()[0].act.layers) {
      const MoeRecord& moe = std::get<MoeRecord>(la.mlp);
      for (int64_t p = 0; p < pairs; ++p) r.push_back(moe.kept[p] ? moe.expert[p] : -1);
      r.resize(r.size() + size_t(pairs));
      moe_topk_plain(r.data() + r.size() - pairs, moe.logits, b * cfg.seq_length,
                     cfg.num_experts, cfg.moe_router_topk);
    }
    return r;
  };
  const std::vector<int32_t> base = routing();
  int experts = 0, routers = 0, shared = 0, skipped = 0;
  for (const ParamSpec& p : m.reg.params()) {
    experts += p.name.find("local_experts") != std::string::npos;
    routers += p.name.find("router.weight") != std::string::npos;
    shared += p.name.find("shared_experts") != std::string::npos;
    std::vector<float> u(size_t(p.numel()));
    double gu = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      u[size_t(i)] = nd(gen) * 10.f;
      gu += double(u[size_t(i)]) * grad[size_t(p.offset + i)];
    }
    std::vector<float> saved(m.params + p.offset, m.params + p.offset + p.numel());
    bool flipped = false;
    auto at = [&](float step) {
      for (int64_t i = 0; i < p.numel(); ++i)
        m.params[p.offset + i] = saved[size_t(i)] + step * u[size_t(i)];
      const double f = objective(false);
      flipped = flipped || routing() != base;
      return f;
    };
    auto central = [&](float eps) { return (at(eps) - at(-eps)) / (2.0 * eps); };
    // The largest step that flips no choice (Richardson extrapolation cancels
    // the O(eps²) term of the central difference).
    double fd = 0;
    bool smooth = false;
    for (float eps = 2e-3f; eps >= 1.2e-4f && !smooth; eps /= 2) {
      flipped = false;
      fd = (4.0 * central(eps / 2) - central(eps)) / 3.0;
      smooth = !flipped;
    }
    for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] = saved[size_t(i)];
    if (!smooth) {
      ++skipped;
      continue;
    }
    EXPECT_NEAR(gu, fd, 1e-2 * std::abs(fd) + 2e-4) << p.name;
  }
  EXPECT_LE(skipped, 3) << "too many tensors flip a routing choice at every step";
  std::printf("%d of %zu tensors skipped (a choice flips at every step)\n", skipped,
              m.reg.params().size());
  EXPECT_EQ(experts, 2 * 4 * 2);  // 2 layers x 4 experts x fc1, fc2
  EXPECT_EQ(shared, cfg.moe_shared_expert_intermediate_size > 0 ? 2 * 2 : 0);
  EXPECT_EQ(routers, 2);
}

TEST(MoeGradient, AuxAndZLossMatchFiniteDifferences) {
  check_moe_gradient(moe_config("aux_loss", false, -1));
}

TEST(MoeGradient, SequenceAuxLossPreSoftmaxMatchFiniteDifferences) {
  check_moe_gradient(moe_config("seq_aux_loss", true, -1));
}

TEST(MoeGradient, SharedExpertMatchesFiniteDifferences) {
  check_moe_gradient(moe_config("aux_loss", false, -1, 12));
}

// --squared-relu experts (and shared expert), one by one and grouped.
TEST(MoeGradient, SquaredReluExpertsMatchFiniteDifferences) {
  for (bool grouped : {false, true}) {
    ModelConfig cfg = moe_config("aux_loss", false, -1, 12, grouped);
    cfg.swiglu = false;
    cfg.squared_relu = true;
    check_moe_gradient(cfg);
  }
}

TEST(MoeGradient, GroupedGemmMatchesFiniteDifferences) {
  check_moe_gradient(moe_config("aux_loss", false, -1, 0, true));
}

TEST(MoeGradient, DroppedTokensMatchFiniteDifferences) {
  check_moe_gradient(moe_config("aux_loss", false, 0.5));
}

// DeepSeek-V3's routing: sigmoid scores normalised over the chosen, times a
// scaling factor, chosen in the best of 2 groups with an expert bias (noise
// on its zeros, so that it changes choices; no gradient of its own), and the
// per-sequence loss on the sigmoid scores normalised over all experts.
TEST(MoeGradient, SigmoidGroupLimitedBiasedRoutingMatchesFiniteDifferences) {
  ModelConfig cfg = moe_config("seq_aux_loss", false, -1);
  cfg.moe_router_score_function = "sigmoid";
  cfg.moe_router_num_groups = 2;
  cfg.moe_router_group_topk = 1;
  cfg.moe_router_topk_scaling_factor = 2.5f;
  cfg.moe_router_enable_expert_bias = true;
  cfg.finalize(1);
  check_moe_gradient(cfg);
}

// The router losses' gradient is scaled by aux_loss_scale alone: doubling it
// doubles what it adds to the router weights' gradient, and it adds nothing
// to the parameters after the last router.
TEST(MoeGradient, AuxLossScaleScalesOnlyTheRouterLosses) {
  ModelConfig cfg = moe_config("aux_loss", false, -1);
  TinyGpt m(cfg, 2);
  m.reg.initialize(m.params, 42);
  std::vector<int32_t> tokens(24, 3), labels(24, 5);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7) % 20);
  auto grads_with = [&](float scale) {
    PassContext ctx;
    ctx.aux_loss_scale = scale;
    m.zero_grads();
    m.loss(tokens, labels, ctx, true);
    return std::vector<float>(m.grads, m.grads + m.reg.total_floats());
  };
  const std::vector<float> g0 = grads_with(0.f), g1 = grads_with(1.f), g2 = grads_with(2.f);
  for (const ParamSpec& p : m.reg.params()) {
    const bool router = p.name.find("router.weight") != std::string::npos;
    double d1 = 0, d2 = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      d1 += std::abs(g1[size_t(p.offset + i)] - g0[size_t(p.offset + i)]);
      d2 += std::abs(g2[size_t(p.offset + i)] - g0[size_t(p.offset + i)]);
    }
    if (router) {
      EXPECT_GT(d1, 0) << p.name;
      EXPECT_NEAR(d2, 2 * d1, 1e-3 * d1) << p.name;
    } else if (p.name.find("layers.1.mlp.experts") != std::string::npos ||
               p.name.find("final_layernorm") != std::string::npos ||
               p.name.find("output_layer") != std::string::npos) {
      // After the last router: the router losses do not reach them.
      EXPECT_EQ(d1, 0) << p.name;
    }
  }
}

}  // namespace moe_gradient_test
}  // namespace mt
