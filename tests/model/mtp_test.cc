// Multi-token prediction (model/mtp.h) on one rank: its parameters by
// Megatron core's names, a finite-difference check of the whole model's
// gradient through the depths (main loss + scale / D x the depths' token
// means), the shifted targets, and that the depths leave the main loss alone.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_test_util.h"

namespace mt {
namespace mtp_test {

ModelConfig mtp_config(int64_t depths, bool tied) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 16;
  cfg.num_attention_heads = 4;
  cfg.seq_length = 8;
  cfg.vocab_size = 20;
  cfg.make_vocab_size_divisible_by = 8;
  cfg.hidden_dropout = 0.1f;
  cfg.attention_dropout = 0.1f;
  cfg.init_method_std = 0.2f;
  cfg.position_embedding_type = "rope";  // Megatron's MTP takes rope (or none)
  cfg.normalization = tied ? "LayerNorm" : "RMSNorm";
  cfg.swiglu = !tied;
  cfg.ffn_hidden_size = 24;
  cfg.untie_embeddings_and_output_weights = !tied;
  cfg.mtp_num_layers = depths;
  cfg.mtp_loss_scaling_factor = 0.5f;  // larger than Megatron's 0.1: a visible share
  cfg.finalize(1);
  return cfg;
}

MicroBatchInput random_batch(const ModelConfig& cfg, int64_t b, bool masked, uint32_t seed) {
  std::mt19937 gen(seed);
  MicroBatchInput mb;
  mb.tokens.resize(size_t(b * cfg.seq_length));
  mb.labels.resize(mb.tokens.size());
  for (auto& t : mb.tokens) t = int32_t(gen() % 20);
  for (auto& t : mb.labels) t = int32_t(gen() % 20);
  if (masked) {
    mb.loss_mask.resize(mb.tokens.size());
    for (float& m : mb.loss_mask) {
      m = gen() % 4 == 0 ? 0.f : 1.f;
      mb.loss_tokens += int64_t(m);
    }
  }
  return mb;
}

// The objective the gradient is of: the main token mean plus scale / D x the
// depths' token means.
double objective(TinyGpt& m, const MicroBatchInput& mb, PassContext ctx, bool backward,
                 std::vector<double>* depth_losses = nullptr) {
  MtpStats stats;
  stats.loss.assign(size_t(m.reg.config().mtp_num_layers), 0.0);
  ctx.mtp_stats = &stats;
  double total = m.loss(mb, ctx, backward);
  const ModelConfig& c = m.reg.config();
  for (double l : stats.loss)
    total += double(c.mtp_loss_scaling_factor) / double(c.mtp_num_layers) * l;
  if (depth_losses) *depth_losses = stats.loss;
  return total;
}

void check_mtp_gradient(const ModelConfig& cfg, bool masked) {
  const int64_t b = 2;
  TinyGpt m(cfg, b);
  m.reg.initialize(m.params, 42);
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const ParamSpec& p : m.reg.params())
    if (p.init != Init::kNormal)
      for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] += nd(gen);
  const MicroBatchInput mb = random_batch(cfg, b, masked, 5);
  PassContext ctx;
  ctx.seed = 99;
  ctx.iteration = 3;
  m.zero_grads();
  std::vector<double> depth_losses;
  objective(m, mb, ctx, true, &depth_losses);
  ASSERT_EQ(depth_losses.size(), size_t(cfg.mtp_num_layers));
  for (double l : depth_losses) EXPECT_GT(l, 1.0);  // a cross-entropy over 20 tokens, ~log 20
  std::vector<float> grad(m.grads, m.grads + m.reg.total_floats());
  for (const ParamSpec& p : m.reg.params()) {
    std::vector<float> u(size_t(p.numel()));
    double gu = 0;
    for (int64_t i = 0; i < p.numel(); ++i) {
      u[size_t(i)] = nd(gen) * 10.f;
      gu += double(u[size_t(i)]) * grad[size_t(p.offset + i)];
    }
    std::vector<float> saved(m.params + p.offset, m.params + p.offset + p.numel());
    auto loss_at = [&](float step) {
      for (int64_t i = 0; i < p.numel(); ++i)
        m.params[p.offset + i] = saved[size_t(i)] + step * u[size_t(i)];
      return objective(m, mb, ctx, false);
    };
    auto central = [&](float eps) { return (loss_at(eps) - loss_at(-eps)) / (2.0 * eps); };
    const float eps = 4e-3f;
    const double fd = (4.0 * central(eps / 2) - central(eps)) / 3.0;
    for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] = saved[size_t(i)];
    EXPECT_NEAR(gu, fd, 1e-2 * std::abs(fd) + 2e-4) << p.name;
    if (p.name.rfind("mtp.", 0) == 0) {
      EXPECT_GT(std::abs(gu), 1e-6) << p.name << " gets no gradient";
    }
  }
}

TEST(Mtp, ParametersHaveMegatronNamesAndShardsOnTheLastStage) {
  const ModelConfig cfg = mtp_config(2, false);
  const ParamRegistry reg(cfg, StageLayout{1, 2, 1, 2, false, true});  // last of 2 stages, TP rank 1
  const ParamSpec& eh = reg.get("mtp.layers.1.eh_proj.weight");
  EXPECT_EQ(eh.global_rows, 16);
  EXPECT_EQ(eh.global_cols, 32);
  EXPECT_EQ(eh.partition_dim, 0);
  EXPECT_EQ(eh.rows, 8);
  EXPECT_EQ(eh.row_offset, 8);
  EXPECT_EQ(eh.part, Part::kLossHead);
  for (const char* name : {"mtp.layers.0.enorm.weight", "mtp.layers.0.hnorm.weight",
                           "mtp.layers.0.final_layernorm.weight",
                           "mtp.layers.0.transformer_layer.input_layernorm.weight",
                           "mtp.layers.0.transformer_layer.self_attention.linear_qkv.weight",
                           "mtp.layers.1.transformer_layer.mlp.linear_fc2.weight"})
    EXPECT_TRUE(reg.has(name)) << name;
  EXPECT_FALSE(reg.has("mtp.layers.2.enorm.weight"));
  // Untied, the last stage still holds the word embedding (the shifted
  // tokens' embedding), tied to the first stage's through the embedding group.
  EXPECT_TRUE(reg.get("embedding.word_embeddings.weight").tied);
  EXPECT_TRUE(reg.has("output_layer.weight"));
  // The first stage holds no MTP parameter.
  const ParamRegistry first(cfg, StageLayout{0, 1, 0, 1, true, false});
  for (const ParamSpec& p : first.params()) EXPECT_NE(p.name.rfind("mtp.", 0), 0u) << p.name;
  // Without MTP nothing changes: no mtp.* names, the untied embedding only on the first stage.
  const ParamRegistry plain(mtp_config(0, false), StageLayout{0, 1, 1, 2, false, true});
  EXPECT_FALSE(plain.has("embedding.word_embeddings.weight"));
}

TEST(Mtp, GradientMatchesFiniteDifferencesPerTensor) {
  check_mtp_gradient(mtp_config(1, true), false);
  check_mtp_gradient(mtp_config(2, false), false);
}

TEST(Mtp, GradientWithShiftedLossMaskMatchesFiniteDifferences) {
  check_mtp_gradient(mtp_config(2, true), true);
}

TEST(Mtp, DepthsLeaveTheMainLossAndAtScaleZeroItsGradient) {
  // The same weights with and without the depths: the main loss is equal
  // (the depths' dropout has its own keys); with --mtp-loss-scaling-factor 0
  // the shared weights' gradients are the plain model's too.
  ModelConfig with = mtp_config(2, false), without = mtp_config(0, false);
  with.mtp_loss_scaling_factor = 0.f;
  TinyGpt a(with, 2), b(without, 2);
  a.reg.initialize(a.params, 3);
  b.reg.initialize(b.params, 3);
  const MicroBatchInput mb = random_batch(with, 2, false, 9);
  PassContext ctx;
  ctx.seed = 1;
  a.zero_grads();
  b.zero_grads();
  std::vector<double> depth_losses;
  const double la = objective(a, mb, ctx, true, &depth_losses);
  const double lb = b.loss(mb, ctx, true);
  EXPECT_EQ(la, lb);
  EXPECT_GT(depth_losses[1], 0.0);
  for (const ParamSpec& p : b.reg.params()) {
    const ParamSpec& q = a.reg.get(p.name);
    for (int64_t i = 0; i < p.numel(); ++i)
      ASSERT_FLOAT_EQ(a.grads[q.offset + i], b.grads[p.offset + i]) << p.name << "[" << i << "]";
  }
}

TEST(Mtp, TargetsAreShiftedAndThePastTheEndMasked) {
  const ModelConfig cfg = mtp_config(2, true);
  TinyGpt m(cfg, 1);
  m.reg.initialize(m.params, 3);
  MicroBatchInput mb = random_batch(cfg, 1, true, 4);
  PassContext ctx;
  objective(m, mb, ctx, false);
  const MtpActivations& rec = m.rt.slots()[0].act.mtp;
  const int64_t s = cfg.seq_length;
  for (int64_t d = 0; d < 2; ++d) {
    const MtpDepthRecord& r = rec.depths[size_t(d)];
    for (int64_t t = 0; t < s; ++t) {
      const int64_t p = t + d + 1;
      EXPECT_EQ(r.host_ids[size_t(t)], p < s ? mb.tokens[size_t(p)] : 0) << d << " " << t;
      EXPECT_EQ(r.host_labels[size_t(t)], p < s ? mb.labels[size_t(p)] : 0);
      EXPECT_EQ(r.host_mask[size_t(t)], p < s ? mb.loss_mask[size_t(p)] : 0.f);
    }
  }
}

TEST(Mtp, RefusedWithLearnedPositions) {
  ModelConfig cfg = mtp_config(1, true);
  cfg.position_embedding_type = "learned_absolute";
  try {
    cfg.finalize(1);
    FAIL() << "learned_absolute with MTP was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--position-embedding-type rope"), std::string::npos)
        << e.what();
  }
}

}  // namespace mtp_test
}  // namespace mt
