#include "kernels/rmsnorm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace rmsnorm_test {

using test::randn;

// Double-precision reference: out (n, c) = x / sqrt(mean(x^2) + eps) * w.
std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                int64_t n, int64_t c, double eps) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t j = 0; j < c; ++j) ms += x[i * c + j] * x[i * c + j];
    const double r = 1.0 / std::sqrt(ms / c + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = x[i * c + j] * r * w[j];
  }
  return y;
}

using test::dot;

TEST(RmsNorm, ForwardMatchesDoubleReference) {
  const int64_t n = 9, c = 150;  // c spans three column blocks, the last partial
  const float eps = 1e-5f;
  auto x = randn(n * c, "rms.x", 2.f, 0.5f), w = randn(c, "rms.w", 0.5f, 1.f);
  std::vector<float> out(n * c), rstd(n);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, eps);
  auto ref = rmsnorm_ref(test::to_double(x), test::to_double(w), n, c, eps);
  for (int64_t k = 0; k < n * c; ++k) ASSERT_NEAR(out[k], ref[k], 1e-5) << "element " << k;
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t j = 0; j < c; ++j) ms += double(x[i * c + j]) * x[i * c + j];
    const double r = 1.0 / std::sqrt(ms / c + eps);
    EXPECT_NEAR(rstd[i], r, 1e-6 * r);
  }
}

TEST(RmsNorm, EpsIsUsed) {
  // A zero row has mean square 0, so rstd = 1/sqrt(eps) and out = 0; a
  // constant row k gives rstd = 1/sqrt(k^2 + eps).
  const int64_t c = 8;
  std::vector<float> x(2 * c, 0.f), w(c, 3.f), out(2 * c, 7.f), rstd(2);
  for (int64_t j = 0; j < c; ++j) x[c + j] = 0.1f;
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 2, c, 1e-2f);
  EXPECT_NEAR(rstd[0], 10.f, 1e-4);
  for (int64_t j = 0; j < c; ++j) EXPECT_EQ(out[j], 0.f);
  EXPECT_NEAR(rstd[1], 1.0 / std::sqrt(0.01 + 0.01), 1e-4);
  for (int64_t j = 0; j < c; ++j) EXPECT_NEAR(out[c + j], 0.1 * 3 / std::sqrt(0.02), 1e-5);
}

TEST(RmsNorm, BackwardFiniteDifferenceAndAccumulate) {
  const int64_t n = 5, c = 70;
  const float eps = 1e-5f;
  auto x = randn(n * c, "rmsg.x", 1.5f, -0.5f), w = randn(c, "rmsg.w", 0.5f, 1.f);
  auto dout = randn(n * c, "rmsg.dout");  // L = sum(out * dout)
  std::vector<float> out(n * c), rstd(n);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, eps);

  // Start the += outputs from known non-zero values.
  auto dinp0 = randn(n * c, "rmsg.dinp0"), dw0 = randn(c, "rmsg.dw0");
  auto dinp = dinp0, dw = dw0;
  rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), n, c);
  // The increments alone, computed from zero, must be what was added (to
  // rounding: the compiler may fuse the += into an fma).
  std::vector<float> dinp_inc(n * c, 0.f), dw_inc(c, 0.f);
  rmsnorm_backward(dinp_inc.data(), dw_inc.data(), dout.data(), x.data(), w.data(), rstd.data(),
                   n, c);
  for (int64_t k = 0; k < n * c; ++k) ASSERT_NEAR(dinp[k], dinp0[k] + dinp_inc[k], 1e-6) << k;
  for (int64_t j = 0; j < c; ++j) ASSERT_NEAR(dw[j], dw0[j] + dw_inc[j], 1e-6) << j;

  const auto xd = test::to_double(x), wd = test::to_double(w);
  auto num_x = test::numeric_grad(
      [&](const std::vector<double>& v) { return dot(rmsnorm_ref(v, wd, n, c, eps), dout); }, xd);
  auto num_w = test::numeric_grad(
      [&](const std::vector<double>& v) { return dot(rmsnorm_ref(xd, v, n, c, eps), dout); }, wd);
  test::expect_grad_close(dinp_inc, num_x, 2e-4, 2e-3, "dinp");
  test::expect_grad_close(dw_inc, num_w, 2e-4, 2e-3, "dweight");
}

TEST(RmsNorm, IsDeterministicAcrossThreadCounts) {
  const int64_t n = 64, c = 200;
  auto x = randn(n * c, "rmsd.x"), w = randn(c, "rmsd.w"), dout = randn(n * c, "rmsd.dout");
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> out(n * c), rstd(n), dinp(n * c, 0.f), dw(c, 0.f);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5f);
    rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), n, c);
    omp_set_num_threads(saved);
    for (auto* v : {&rstd, &dinp, &dw}) out.insert(out.end(), v->begin(), v->end());
    return out;
  };
  const auto one = run(1), two = run(2), three = run(3);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

TEST(RmsNorm, BadShapeThrows) {
  std::vector<float> x(4), w(4), out(4), rstd(1);
  EXPECT_THROW(rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, 0, 1e-5f), Error);
  EXPECT_THROW(rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, 4, 0.f), Error);
}

}  // namespace rmsnorm_test
}  // namespace mt
