// --apply-layernorm-1p (zero-centred gamma) in the LayerNorm and RMSNorm
// kernels: the stored weight w scales as (1 + w). Forward against a double
// reference, backward against finite differences, and the option against the
// plain kernel given 1 + w.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"

namespace mt {
namespace norm_1p_test {

using test::randn;

// y = norm(x) * (1 + w) + b over rows of c; rms: no centring and no bias.
std::vector<double> norm_1p_ref(const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>& b, int64_t n, int64_t c, double eps,
                                bool rms) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < c; ++j) m += x[i * c + j];
      m /= double(c);
    }
    for (int64_t j = 0; j < c; ++j) var += (x[i * c + j] - m) * (x[i * c + j] - m);
    const double r = 1.0 / std::sqrt(var / double(c) + eps);
    for (int64_t j = 0; j < c; ++j)
      y[i * c + j] = (x[i * c + j] - m) * r * (1.0 + w[j]) + (rms ? 0.0 : b[j]);
  }
  return y;
}

using test::dot;

struct Case {
  bool rms;
};

class Norm1p : public ::testing::TestWithParam<Case> {};

// out, and the plain kernel's out given the weight 1 + w.
void forward(bool rms, bool centred, std::vector<float>& out, std::vector<float>& mean,
             std::vector<float>& rstd, const std::vector<float>& x, const std::vector<float>& w,
             const std::vector<float>& b, int64_t n, int64_t c) {
  if (rms)
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5f, centred);
  else
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c,
                      1e-5f, centred);
}

TEST_P(Norm1p, ForwardIsTheNormScaledByOnePlusWeight) {
  const bool rms = GetParam().rms;
  const int64_t n = 7, c = 130;
  auto x = randn(n * c, "n1p.x", 2.f, 0.3f), w = randn(c, "n1p.w", 0.2f), b = randn(c, "n1p.b");
  std::vector<float> out(n * c), mean(n), rstd(n), plain(n * c), w1(c);
  forward(rms, true, out, mean, rstd, x, w, b, n, c);
  const auto ref = norm_1p_ref(test::to_double(x), test::to_double(w), test::to_double(b), n, c,
                               1e-5, rms);
  for (int64_t k = 0; k < n * c; ++k) ASSERT_NEAR(out[k], ref[k], 2e-5) << "element " << k;
  for (int64_t j = 0; j < c; ++j) w1[j] = 1.f + w[j];
  forward(rms, false, plain, mean, rstd, x, w1, b, n, c);
  for (int64_t k = 0; k < n * c; ++k) ASSERT_NEAR(out[k], plain[k], 1e-6) << "element " << k;
  // Megatron initialises the stored weight to 0: the plain norm with gamma 1.
  std::vector<float> zeros(c, 0.f), ones(c, 1.f);
  forward(rms, true, out, mean, rstd, x, zeros, b, n, c);
  forward(rms, false, plain, mean, rstd, x, ones, b, n, c);
  EXPECT_EQ(out, plain);
}

TEST_P(Norm1p, BackwardFiniteDifference) {
  const bool rms = GetParam().rms;
  const int64_t n = 4, c = 70;
  auto x = randn(n * c, "n1pg.x", 1.5f, -0.4f), w = randn(c, "n1pg.w", 0.3f);
  auto b = randn(c, "n1pg.b"), dout = randn(n * c, "n1pg.dout");
  std::vector<float> out(n * c), mean(n), rstd(n);
  forward(rms, true, out, mean, rstd, x, w, b, n, c);
  std::vector<float> dinp(n * c, 0.f), dw(c, 0.f), db(c, 0.f);
  if (rms)
    rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), n, c,
                     true);
  else
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), n, c, true);
  const auto xd = test::to_double(x), wd = test::to_double(w), bd = test::to_double(b);
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
    return dot(norm_1p_ref(xv, wv, bd, n, c, 1e-5, rms), dout);
  };
  test::expect_grad_close(
      dinp, test::numeric_grad([&](const std::vector<double>& v) { return loss(v, wd); }, xd),
      2e-4, 2e-3, "dinp");
  test::expect_grad_close(
      dw, test::numeric_grad([&](const std::vector<double>& v) { return loss(xd, v); }, wd), 2e-4,
      2e-3, "dweight");
}

INSTANTIATE_TEST_SUITE_P(Kinds, Norm1p, ::testing::Values(Case{false}, Case{true}),
                         [](const auto& info) {
                           return std::string(info.param.rms ? "RMSNorm" : "LayerNorm");
                         });

}  // namespace norm_1p_test
}  // namespace mt
