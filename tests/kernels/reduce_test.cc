#include "kernels/reduce.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace mt {
namespace reduce_test {

TEST(Reduce, SumSquaresInDouble) {
  const int64_t n = 100003;
  auto x = test::randn(n, "red.x", 3.f);
  double want = 0;
  for (float e : x) want += double(e) * e;
  EXPECT_NEAR(sum_squares(x.data(), n), want, 1e-12 * want);
  EXPECT_EQ(sum_squares(x.data(), 0), 0.0);
  // 2^24 + 1 ones: a float accumulator would stop at 2^24.
  std::vector<float> ones((1 << 24) + 1, 1.f);
  EXPECT_EQ(sum_squares(ones.data(), int64_t(ones.size())), double((1 << 24) + 1));
  // Values whose squares overflow float are fine in double.
  std::vector<float> big = {3e20f, 4e20f};
  const double want_big = double(big[0]) * big[0] + double(big[1]) * big[1];
  EXPECT_NEAR(sum_squares(big.data(), 2), want_big, 1e-15 * want_big);
  EXPECT_TRUE(std::isfinite(sum_squares(big.data(), 2)));
}

TEST(Reduce, SumSquaresDeterministicForAThreadCount) {
  const int64_t n = 1 << 20;
  auto x = test::randn(n, "red.det", 1.f, 0.3f);
  for (int threads : {1, 2, 3}) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const double a = sum_squares(x.data(), n), b = sum_squares(x.data(), n);
    omp_set_num_threads(saved);
    EXPECT_EQ(a, b) << threads << " threads";
  }
}

TEST(Reduce, SumSquaresOverRangesIsTheRangesSumsInOrder) {
  // The optimizer's segments: sizes below, at and above the thread count,
  // an empty one, and ranges that abut (summed apart all the same).
  const std::vector<int64_t> sizes = {1, 0, 3, 128, 4099, 2, 70001, 5};
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  auto x = test::randn(total, "red.ranges", 2.f, 0.1f);
  std::vector<FloatRange> ranges;
  int64_t at = 0;
  for (int64_t s : sizes) {
    ranges.push_back({x.data() + at, s});
    at += s;
  }
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    double want = 0;
    for (const FloatRange& r : ranges) want += sum_squares(r.x, r.n);
    EXPECT_EQ(sum_squares(ranges.data(), ranges.size()), want) << threads << " threads";
    double exact = 0;
    for (float e : x) exact += double(e) * e;
    EXPECT_NEAR(want, exact, 1e-12 * exact);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(sum_squares(ranges.data(), 0), 0.0);
}

TEST(Reduce, ScaleInplace) {
  auto x = test::randn(1001, "red.s");
  auto y = x;
  scale_inplace(y.data(), int64_t(y.size()), -0.5f);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] * -0.5f);
}

TEST(Reduce, AddScaledInplace) {
  std::vector<float> y = {1.f, -2.f, 0.5f, 3.f}, x = {2.f, 4.f, -1.f, 0.f};
  add_scaled_inplace(y.data(), x.data(), 4, 0.25f);
  EXPECT_EQ(y, (std::vector<float>{1.5f, -1.f, 0.25f, 3.f}));
}

TEST(Reduce, AllFiniteFindsNanAndInfAnywhere) {
  const int64_t n = 4097;
  auto x = test::randn(n, "red.f", 1e30f);
  x[7] = std::numeric_limits<float>::max();
  x[8] = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(all_finite(x.data(), n));
  EXPECT_TRUE(all_finite(x.data(), 0));
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), -std::nanf("")};
  for (float b : bad)
    for (int64_t pos : {int64_t(0), int64_t(2000), n - 1}) {
      auto y = x;
      y[pos] = b;
      EXPECT_FALSE(all_finite(y.data(), n)) << b << " at " << pos;
    }
}

}  // namespace reduce_test
}  // namespace mt
