#include "kernels/layernorm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace mt {
namespace layernorm_test {

using test::randn;

// Double-precision reference: out (n, c) of LayerNorm with biased variance.
std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b, int64_t n, int64_t c, double eps) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[i * c + j];
    m /= c;
    for (int64_t j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m);
    v /= c;
    const double r = 1.0 / std::sqrt(v + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = (x[i * c + j] - m) * r * w[j] + b[j];
  }
  return y;
}

using test::dot;

TEST(LayerNorm, ForwardMatchesDoubleReference) {
  const int64_t n = 9, c = 150;  // c spans three column blocks, the last partial
  const float eps = 1e-5f;
  auto x = randn(n * c, "ln.x", 2.f, 3.f), w = randn(c, "ln.w", 0.5f, 1.f), b = randn(c, "ln.b");
  std::vector<float> out(n * c), mean(n), rstd(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, eps);
  auto ref = layernorm_ref(test::to_double(x), test::to_double(w), test::to_double(b), n, c, eps);
  for (int64_t k = 0; k < n * c; ++k) ASSERT_NEAR(out[k], ref[k], 2e-5) << "element " << k;
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[i * c + j];
    m /= c;
    for (int64_t j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m);
    v /= c;  // biased, as torch
    EXPECT_NEAR(mean[i], m, 1e-5);
    EXPECT_NEAR(rstd[i], 1.0 / std::sqrt(v + eps), 1e-5 / std::sqrt(v + eps));
  }
}

TEST(LayerNorm, EpsIsUsed) {
  // A constant row has variance 0, so rstd = 1/sqrt(eps) and out = bias.
  const int64_t c = 8;
  std::vector<float> x(c, 2.5f), w(c, 3.f), b(c, 0.25f), out(c), mean(1), rstd(1);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 1, c,
                    1e-2f);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_NEAR(rstd[0], 10.f, 1e-4);
  for (float y : out) EXPECT_FLOAT_EQ(y, 0.25f);
}

TEST(LayerNorm, BackwardFiniteDifferenceAndAccumulate) {
  const int64_t n = 5, c = 70;
  const float eps = 1e-5f;
  auto x = randn(n * c, "lng.x", 1.5f, -0.5f), w = randn(c, "lng.w", 0.5f, 1.f),
       b = randn(c, "lng.b", 0.3f);
  auto dout = randn(n * c, "lng.dout");  // L = sum(out * dout)
  std::vector<float> out(n * c), mean(n), rstd(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, eps);

  // Start the += outputs from known non-zero values.
  auto dinp0 = randn(n * c, "lng.dinp0"), dw0 = randn(c, "lng.dw0"), db0 = randn(c, "lng.db0");
  auto dinp = dinp0, dw = dw0, db = db0;
  layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                     mean.data(), rstd.data(), n, c);
  for (int64_t k = 0; k < n * c; ++k) dinp[k] -= dinp0[k];
  for (int64_t j = 0; j < c; ++j) dw[j] -= dw0[j], db[j] -= db0[j];

  const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b);
  auto num_x = test::numeric_grad(
      [&](const std::vector<double>& v) { return dot(layernorm_ref(v, wd, bd, n, c, eps), dout); },
      xd);
  auto num_w = test::numeric_grad(
      [&](const std::vector<double>& v) { return dot(layernorm_ref(xd, v, bd, n, c, eps), dout); },
      wd);
  auto num_b = test::numeric_grad(
      [&](const std::vector<double>& v) { return dot(layernorm_ref(xd, wd, v, n, c, eps), dout); },
      bd);
  test::expect_grad_close(dinp, num_x, 2e-4, 2e-3, "dinp");
  test::expect_grad_close(dw, num_w, 2e-4, 2e-3, "dweight");
  test::expect_grad_close(db, num_b, 2e-4, 2e-3, "dbias");
}

TEST(LayerNorm, BackwardIsDeterministicAcrossThreadCounts) {
  const int64_t n = 64, c = 200;
  auto x = randn(n * c, "lnd.x"), w = randn(c, "lnd.w"), b = randn(c, "lnd.b");
  auto dout = randn(n * c, "lnd.dout");
  std::vector<float> out(n * c), mean(n), rstd(n);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c,
                    1e-5f);
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> dinp(n * c, 0.f), dw(c, 0.f), db(c, 0.f);
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), n, c);
    omp_set_num_threads(saved);
    dinp.insert(dinp.end(), dw.begin(), dw.end());
    dinp.insert(dinp.end(), db.begin(), db.end());
    return dinp;
  };
  const auto one = run(1), two = run(2), three = run(3);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

}  // namespace layernorm_test
}  // namespace mt
