// Grad norm counts each parameter once; clipping scales to the limit; weight
// decay skips biases and norms (Megatron's rule).
#include "optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mt {
namespace {

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
  opt.clip(g.data(), norm);
  EXPECT_NEAR(opt.grad_norm(g.data(), nullptr), 1.0, 1e-5);
  opt.clip(g.data(), 0.5);  // below the limit: unchanged
  EXPECT_NEAR(opt.grad_norm(g.data(), nullptr), 1.0, 1e-5);
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

}  // namespace
}  // namespace mt
