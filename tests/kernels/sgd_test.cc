#include "kernels/sgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/precision.h"

namespace mt {
namespace sgd_test {

TEST(Sgd, FirstStepByHand) {
  // Step 1: buf = g + wd p; p -= lr buf.
  SgdHyper h;
  h.lr = 0.1f;
  h.momentum = 0.9f;
  h.weight_decay = 0.01f;
  float p = 2.f, g = 0.5f, buf = 0.f;
  sgd_step(&p, &g, &buf, 1, h);
  EXPECT_NEAR(buf, 0.5 + 0.01 * 2.0, 1e-7);
  EXPECT_NEAR(p, 2.0 - 0.1 * 0.52, 1e-7);
}

// Four steps of torch's formulas in double (momentum, L2 decay, clip scale).
TEST(Sgd, FourStepsMatchDoubleReference) {
  const int64_t n = 1000;
  SgdHyper h;
  h.lr = 0.05f;
  h.momentum = 0.8f;
  h.weight_decay = 0.1f;
  h.grad_scale = 0.5f;
  auto p = test::randn(n, "sgd.p", 0.5f);
  std::vector<float> buf(n, 0.f);
  std::vector<double> pd = test::to_double(p), bd(n, 0.0);
  for (int step = 1; step <= 4; ++step) {
    auto g = test::randn(n, "sgd.g" + std::to_string(step), 1e-1f);
    sgd_step(p.data(), g.data(), buf.data(), n, h);
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(g[i]) * h.grad_scale + double(h.weight_decay) * pd[i];
      bd[i] = step == 1 ? d : double(h.momentum) * bd[i] + d;  // torch: a copy of d first
      pd[i] -= double(h.lr) * bd[i];
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(p[i], pd[i], 1e-6 * (1 + std::fabs(pd[i]))) << "param " << i << " step " << step;
      ASSERT_NEAR(buf[i], bd[i], 1e-6 * (1 + std::fabs(bd[i]))) << "buf " << i << " step " << step;
    }
  }
  auto p0 = test::randn(n, "sgd.p", 0.5f);
  double moved = 0;
  for (int64_t i = 0; i < n; ++i) moved += std::fabs(pd[i] - p0[i]) / n;
  EXPECT_GT(moved, 1e-2);  // the reference moved well past the tolerance
}

TEST(Sgd, ZeroMomentumIsPlainGradientDescentAndLeavesTheBuffer) {
  SgdHyper h;
  h.lr = 0.5f;
  h.momentum = 0.f;
  float p[2] = {1.f, -1.f}, g[2] = {0.25f, 0.5f}, buf[2] = {7.f, 7.f};
  uint16_t copy[2] = {0, 0};
  sgd_step(p, g, buf, 2, h, copy);
  EXPECT_FLOAT_EQ(p[0], 0.875f);
  EXPECT_FLOAT_EQ(p[1], -1.25f);
  EXPECT_EQ(buf[0], 7.f);
  EXPECT_EQ(copy[1], bf16_from_f32(p[1]));
}

}  // namespace sgd_test
}  // namespace mt
