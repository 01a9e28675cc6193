#include "kernels/swiglu.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace swiglu_test {

using test::randn;

double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

// out (n, f) = silu(gate) * up for in (n, 2f) rows [gate | up], in double.
std::vector<double> swiglu_ref(const std::vector<double>& in, int64_t n, int64_t f) {
  std::vector<double> y(size_t(n * f));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j)
      y[i * f + j] = silu_ref(in[i * 2 * f + j]) * in[i * 2 * f + f + j];
  return y;
}

TEST(SwiGlu, ForwardMatchesDoubleReference) {
  const int64_t n = 7, f = 37;
  auto in = randn(n * 2 * f, "swiglu.in", 3.f);
  // Extremes in the gates of row 0: no overflow, silu -> 0 or -> x.
  const float extremes[] = {-1000.f, -100.f, -30.f, 30.f, 100.f, 1000.f, 0.f};
  for (int j = 0; j < 7; ++j) in[j] = extremes[j];
  std::vector<float> out(n * f);
  swiglu_forward(out.data(), in.data(), n, f);
  const auto ref = swiglu_ref(test::to_double(in), n, f);
  for (int64_t k = 0; k < n * f; ++k) {
    ASSERT_TRUE(std::isfinite(out[k])) << k;
    ASSERT_NEAR(out[k], ref[k], 2e-6 * (1 + std::fabs(ref[k]))) << "element " << k;
  }
  EXPECT_EQ(out[0], 0.f);
  EXPECT_FLOAT_EQ(out[5], 1000.f * in[f + 5]);
  EXPECT_EQ(out[6], 0.f);
}

TEST(SwiGlu, BackwardFiniteDifferenceAndOverwrites) {
  const int64_t n = 6, f = 29;
  auto in = randn(n * 2 * f, "swiglug.in", 2.5f), dout = randn(n * f, "swiglug.dout");
  auto din = randn(n * 2 * f, "swiglug.garbage");  // overwritten, not accumulated
  swiglu_backward(din.data(), in.data(), dout.data(), n, f);
  auto num = test::numeric_grad(
      [&](const std::vector<double>& v) {
        const auto y = swiglu_ref(v, n, f);
        double l = 0;
        for (size_t k = 0; k < y.size(); ++k) l += y[k] * dout[k];
        return l;
      },
      test::to_double(in));
  test::expect_grad_close(din, num, 1e-5, 1e-4, "swiglu din");
}

TEST(SwiGlu, BackwardIsFiniteForLargeGates) {
  const int64_t f = 6;
  std::vector<float> in = {-1000.f, -100.f, -50.f, 50.f, 100.f, 1000.f, 1, 2, 3, 4, 5, 6};
  std::vector<float> dout(f, 1.f), din(2 * f);
  swiglu_backward(din.data(), in.data(), dout.data(), 1, f);
  for (float v : din) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_NEAR(din[0], 0.f, 1e-30f);      // silu'(-1000) ~ 0
  EXPECT_FLOAT_EQ(din[5], 6.f);          // silu'(1000) = 1, times up
  EXPECT_FLOAT_EQ(din[f + 5], 1000.f);   // silu(1000)
  EXPECT_NEAR(din[f + 0], 0.f, 1e-30f);  // silu(-1000)
}

TEST(SwiGlu, IsDeterministicAcrossThreadCounts) {
  const int64_t n = 50, f = 96;
  auto in = randn(n * 2 * f, "swiglud.in"), dout = randn(n * f, "swiglud.dout");
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> out(n * f), din(n * 2 * f);
    swiglu_forward(out.data(), in.data(), n, f);
    swiglu_backward(din.data(), in.data(), dout.data(), n, f);
    omp_set_num_threads(saved);
    out.insert(out.end(), din.begin(), din.end());
    return out;
  };
  const auto one = run(1), two = run(2), three = run(3);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

TEST(SwiGlu, BackwardRefusesAliasedDout) {
  const int64_t n = 2, f = 4;
  std::vector<float> in(n * 2 * f, 1.f), buf(n * 2 * f, 1.f);
  EXPECT_THROW(swiglu_backward(buf.data(), in.data(), buf.data(), n, f), Error);
  EXPECT_THROW(swiglu_backward(buf.data(), in.data(), buf.data() + f, n, f), Error);
}

}  // namespace swiglu_test
}  // namespace mt
