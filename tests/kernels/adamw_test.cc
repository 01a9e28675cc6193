#include "kernels/adamw.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"
#include "kernels/precision.h"

namespace mt {
namespace adamw_test {

TEST(AdamW, FirstStepByHand) {
  // m = v = 0, step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps).
  AdamWHyper h;
  h.lr = 0.1f;
  h.weight_decay = 0.1f;
  float p = 1.f, g = 0.5f, m = 0.f, v = 0.f;
  adamw_step(&p, &g, &m, &v, 1, h, 1);
  EXPECT_NEAR(p, 1.0 * (1 - 0.01) - 0.1 * 0.5 / (0.5 + 1e-8), 1e-7);  // 0.89
  // Betas are floats: 1 - 0.9f and 1 - 0.999f are off by ~1e-7 absolute.
  EXPECT_NEAR(m, 0.05, 5e-8);
  EXPECT_NEAR(v, 0.00025, 1e-8);
}

// Three steps with weight decay against the formula evaluated in double.
TEST(AdamW, ThreeStepsMatchDoubleReference) {
  const int64_t n = 1000;
  AdamWHyper h;
  h.lr = 3e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  auto p = test::randn(n, "adam.p", 0.5f);
  std::vector<float> m(n, 0.f), v(n, 0.f);
  std::vector<double> pd = test::to_double(p), md(n, 0.0), vd(n, 0.0);
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  for (int step = 1; step <= 3; ++step) {
    auto g = test::randn(n, "adam.g" + std::to_string(step), 1e-2f);
    g[0] = 0.f;    // pure decay and momentum
    g[1] = 50.f;   // large gradient
    g[2] = -1e-6f; // tiny gradient, eps matters
    adamw_step(p.data(), g.data(), m.data(), v.data(), n, h, step);
    for (int64_t i = 0; i < n; ++i) {
      pd[i] *= 1 - lr * wd;
      md[i] = b1 * md[i] + (1 - b1) * g[i];
      vd[i] = b2 * vd[i] + (1 - b2) * double(g[i]) * g[i];
      const double m_hat = md[i] / (1 - std::pow(b1, step));
      const double v_hat = vd[i] / (1 - std::pow(b2, step));
      pd[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(p[i], pd[i], 2e-6 * (1 + std::fabs(pd[i]))) << "param " << i << " step " << step;
      ASSERT_NEAR(m[i], md[i], 1e-5 * std::fabs(md[i]) + 1e-9) << "m " << i << " step " << step;
      ASSERT_NEAR(v[i], vd[i], 1e-5 * std::fabs(vd[i]) + 1e-13) << "v " << i << " step " << step;
    }
  }
  // The reference moved the parameters by more than the tolerance (test has teeth).
  auto p0 = test::randn(n, "adam.p", 0.5f);
  double moved = 0;
  for (int64_t i = 0; i < n; ++i) moved += std::fabs(pd[i] - p0[i]) / n;
  EXPECT_GT(moved, 1e-3);
}

// With a bf16 copy the update is the same, and the copy is bf16 of it.
TEST(AdamW, WritesTheBf16CopyOfTheUpdate) {
  const int64_t n = 4099;
  std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n)), m(p.size(), 0.f),
      v(p.size(), 0.f);
  for (int64_t i = 0; i < n; ++i) {
    p[size_t(i)] = std::sin(0.37f * float(i));
    g[size_t(i)] = std::cos(0.11f * float(i)) * 1e-2f;
  }
  std::vector<float> p2 = p, m2 = m, v2 = v;
  std::vector<uint16_t> copy(p.size(), 0);
  AdamWHyper h;
  h.weight_decay = 0.1f;
  adamw_step(p.data(), g.data(), m.data(), v.data(), n, h, 1);
  adamw_step(p2.data(), g.data(), m2.data(), v2.data(), n, h, 1, copy.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(p2[size_t(i)], p[size_t(i)]) << i;
    ASSERT_EQ(copy[size_t(i)], bf16_from_f32(p[size_t(i)])) << i;
  }
}

TEST(AdamW, SegmentsInOnePassAreEachSegmentsStep) {
  // Segments of a model: each its own lr, decay, clip factor and bf16 copy,
  // sizes below and above the thread count; one call over all of them must
  // give what one call per segment gives, bit for bit, on every thread count.
  const std::vector<int64_t> sizes = {1, 3, 4099, 128, 0, 70001};
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<std::vector<float>> p[2], g, m[2], v[2];
    std::vector<std::vector<uint16_t>> copy[2];
    std::vector<AdamWHyper> hs;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t n = sizes[k];
      g.push_back(test::randn(n, "adamw.seg.g" + std::to_string(k), 1e-2f));
      AdamWHyper h;
      h.lr = 1e-3f * float(k + 1);
      h.weight_decay = k % 2 ? 0.1f : 0.f;
      h.grad_scale = k == 2 ? 0.5f : 1.f;
      hs.push_back(h);
      for (int w = 0; w < 2; ++w) {
        p[w].push_back(test::randn(n, "adamw.seg.p" + std::to_string(k)));
        m[w].push_back(std::vector<float>(size_t(n), 1e-3f));
        v[w].push_back(std::vector<float>(size_t(n), 1e-5f));
        copy[w].push_back(std::vector<uint16_t>(size_t(n), 0));
      }
    }
    for (int64_t step = 1; step <= 3; ++step) {
      std::vector<AdamWSegment> segs;
      for (size_t k = 0; k < sizes.size(); ++k) {
        uint16_t* c0 = k % 3 == 0 ? copy[0][k].data() : nullptr;
        uint16_t* c1 = k % 3 == 0 ? copy[1][k].data() : nullptr;
        adamw_step(p[0][k].data(), g[k].data(), m[0][k].data(), v[0][k].data(), sizes[k], hs[k],
                   step, c0);
        segs.push_back({p[1][k].data(), g[k].data(), m[1][k].data(), v[1][k].data(), sizes[k],
                        hs[k], c1});
      }
      adamw_step(segs.data(), segs.size(), step);
    }
    for (size_t k = 0; k < sizes.size(); ++k)
      for (size_t i = 0; i < size_t(sizes[k]); ++i) {
        ASSERT_EQ(p[1][k][i], p[0][k][i]) << threads << " threads, segment " << k << " [" << i << "]";
        ASSERT_EQ(m[1][k][i], m[0][k][i]) << k << " " << i;
        ASSERT_EQ(v[1][k][i], v[0][k][i]) << k << " " << i;
        ASSERT_EQ(copy[1][k][i], copy[0][k][i]) << k << " " << i;
      }
    EXPECT_NE(p[1][2][7], test::randn(sizes[2], "adamw.seg.p2")[7]);  // it stepped
  }
  omp_set_num_threads(saved);
}

TEST(AdamW, RejectsStepZero) {
  float p = 0, g = 0, m = 0, v = 0;
  EXPECT_THROW(adamw_step(&p, &g, &m, &v, 1, AdamWHyper{}, 0), Error);
}

}  // namespace adamw_test
}  // namespace mt
