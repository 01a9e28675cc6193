// Grad norm counts each parameter once; clipping scales to the limit; weight
// decay skips biases and norms (Megatron's rule).
#include "optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/reduce.h"

namespace mt {
namespace optimizer_test {

ModelConfig tiny() {
  ModelConfig c;
  c.num_layers = 1;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.seq_length = 4;
  c.vocab_size = 10;
  c.make_vocab_size_divisible_by = 4;
  c.finalize(1);
  return c;
}

TEST(AdamWOptimizer, GradNormAndClip) {
  const ModelConfig c = tiny();
  ParamRegistry reg(c, StageLayout{0, 1, 0, 1, true, true});
  OptimizerConfig oc;
  oc.clip_grad = 1.0f;
  AdamWOptimizer opt(reg, oc);
  std::vector<float> g(size_t(reg.total_floats()), 0.f);
  double sq = 0;
  for (const ParamSpec& p : reg.params())
    for (int64_t i = 0; i < p.numel(); ++i) {
      g[size_t(p.offset + i)] = 0.1f * float(i % 7 - 3);
      sq += double(g[size_t(p.offset + i)]) * g[size_t(p.offset + i)];
    }
  const double norm = opt.grad_norm(g.data(), nullptr);
  EXPECT_NEAR(norm, std::sqrt(sq), 1e-9 * norm);
  ASSERT_GT(norm, 1.0);
  const float coeff = opt.clip_coefficient(norm);
  EXPECT_EQ(coeff, float(1.0 / (norm + 1e-6)));
  EXPECT_EQ(opt.clip_coefficient(0.5), 1.f);  // below the limit: unchanged
  oc.clip_grad = 0.f;                          // no clipping
  EXPECT_EQ(AdamWOptimizer(reg, oc).clip_coefficient(norm), 1.f);

  // The step applies the coefficient: the same bits as scaling the gradients
  // first (torch's grad.mul_(clip_coef), then the step), and grads unchanged.
  std::vector<float> p1(g.size(), 0.5f), p2 = p1, scaled = g;
  scale_inplace(scaled.data(), int64_t(scaled.size()), coeff);
  oc.clip_grad = 1.0f;
  AdamWOptimizer a(reg, oc), b(reg, oc);
  const std::vector<float> g_before = g;
  for (int step = 0; step < 3; ++step) {
    a.step(p1.data(), g.data(), 1e-2, nullptr, coeff);
    b.step(p2.data(), scaled.data(), 1e-2);
  }
  EXPECT_EQ(g, g_before);
  for (size_t i = 0; i < p1.size(); ++i) ASSERT_EQ(p1[i], p2[i]) << "element " << i;
  const double clipped = a.grad_norm(scaled.data(), nullptr);
  EXPECT_NEAR(clipped, 1.0, 1e-5);
}

TEST(AdamWOptimizer, WeightDecaySkipsBiasesAndNorms) {
  const ModelConfig c = tiny();
  ParamRegistry reg(c, StageLayout{0, 1, 0, 1, true, true});
  OptimizerConfig oc;
  oc.weight_decay = 0.5f;
  AdamWOptimizer opt(reg, oc);
  std::vector<float> p(size_t(reg.total_floats()), 1.f), g(p.size(), 0.f);
  opt.step(p.data(), g.data(), 0.1);  // zero gradient: only decay moves weights
  for (const ParamSpec& s : reg.params()) {
    const float expect = s.weight_decay ? 1.f - 0.1f * 0.5f : 1.f;
    EXPECT_FLOAT_EQ(p[size_t(s.offset)], expect) << s.name;
    EXPECT_EQ(s.weight_decay, s.ndim == 2) << s.name;
  }
}

}  // namespace optimizer_test
}  // namespace mt
