#include "kernels/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace mt {
namespace vec_math_test {

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(int64_t(ia) - int64_t(ib));
}

// The vectorised path is the one the kernels use, so test it in a simd loop.
void exp_all(float* y, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i]);
}

TEST(VecMath, ExpWithinTwoUlpOfLibm) {
  const int64_t n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -87.f + 175.5f * float(i) / float(n);  // normal results
  exp_all(y.data(), x.data(), n);
  int64_t worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, ulp_distance(y[i], std::exp(x[i])));
  EXPECT_LE(worst, 2);
}

TEST(VecMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.f, 1.f, -1.f, -200.f, -inf, 89.f, 1000.f, inf,
                                std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(x.size());
  exp_all(y.data(), x.data(), int64_t(x.size()));
  EXPECT_EQ(y[0], 1.f);
  EXPECT_LE(ulp_distance(y[1], std::exp(1.f)), 1);
  EXPECT_LE(ulp_distance(y[2], std::exp(-1.f)), 1);
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[4], 0.f);
  EXPECT_EQ(y[5], inf);
  EXPECT_EQ(y[6], inf);
  EXPECT_EQ(y[7], inf);
  EXPECT_TRUE(std::isnan(y[8]));
  // Gradual underflow into denormals, as expf.
  float d = -90.f, e;
  exp_all(&e, &d, 1);
  EXPECT_GT(e, 0.f);
  EXPECT_NEAR(e, std::exp(-90.f), 2e-45);
}

// The largest element wherever it sits, for lengths around the SIMD width,
// all-negative rows and a single element.
TEST(VecMath, RowMaxFindsTheLargestAnywhere) {
  for (int64_t n : {1, 2, 15, 16, 17, 31, 33, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) x[size_t(j)] = -100.f - float((j * 37) % 11);
    for (int64_t at : {int64_t(0), n / 2, n - 1}) {
      std::vector<float> y = x;
      y[size_t(at)] = -3.5f;
      EXPECT_EQ(row_max(y.data(), n), -3.5f) << "n " << n << " at " << at;
    }
    EXPECT_EQ(row_max(x.data(), n), *std::max_element(x.begin(), x.end())) << "n " << n;
  }
}

}  // namespace vec_math_test
}  // namespace mt
