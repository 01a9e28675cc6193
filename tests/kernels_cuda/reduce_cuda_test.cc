// reduce's CUDA twins against the CPU code and a double reference:
// sum_squares within 1e-12 relative (both sum in double, in different orders)
// and identical on repeated calls (a fixed reduction tree); scale_inplace
// exactly (one float product); all_finite's answer exactly.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/reduce.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace reduce_cuda_test {

using test::OnGpu;

TEST(ReduceCuda, SumSquaresInDouble) {
  MT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(257), int64_t(100003), int64_t(3000017)}) {
    const auto x = test::randn(n, "reduce.cuda.x", 3.f);
    double want = 0;
    for (float e : x) want += double(e) * e;
    OnGpu<float> gx(x);
    const double got = sum_squares(gx.get(), n);
    EXPECT_NEAR(got, want, 1e-12 * want) << "n=" << n;
    EXPECT_NEAR(got, sum_squares(x.data(), n), 1e-12 * want) << "n=" << n;
    EXPECT_EQ(sum_squares(gx.get(), n), got) << "not deterministic, n=" << n;
  }
  OnGpu<float> one(std::vector<float>{2.f});
  EXPECT_EQ(sum_squares(one.get(), 0), 0.0);
  // 2^24 + 1 ones: a float accumulator would stop at 2^24.
  const std::vector<float> ones((1 << 24) + 1, 1.f);
  OnGpu<float> gones(ones);
  EXPECT_EQ(sum_squares(gones.get(), int64_t(ones.size())), double((1 << 24) + 1));
  // Squares that overflow float are fine in double.
  const std::vector<float> big = {3e20f, 4e20f};
  OnGpu<float> gbig(big);
  const double want_big = double(big[0]) * big[0] + double(big[1]) * big[1];
  EXPECT_NEAR(sum_squares(gbig.get(), 2), want_big, 1e-15 * want_big);
}

TEST(ReduceCuda, ScaleInplace) {
  MT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(257), int64_t(100003)}) {
    auto x = test::randn(n, "reduce.cuda.scale");
    OnGpu<float> gx(x);
    scale_inplace(x.data(), n, 0.37f);
    scale_inplace(gx.get(), n, 0.37f);
    EXPECT_EQ(gx.host(), x) << "n=" << n;
  }
}

TEST(ReduceCuda, AllFinite) {
  MT_REQUIRE_GPU();
  const int64_t n = (1 << 20) + 3;  // more elements than the grid's threads: grid-stride
  const auto x = test::randn(n, "reduce.cuda.finite", 1e30f);
  OnGpu<float> gx(x);
  EXPECT_TRUE(all_finite(gx.get(), n));
  EXPECT_TRUE(all_finite(gx.get(), 0));
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (float v : bad)
    for (int64_t at : {int64_t(0), int64_t(12345), n - 1}) {
      auto y = x;
      y[size_t(at)] = v;
      OnGpu<float> gy(y);
      EXPECT_EQ(all_finite(gy.get(), n), all_finite(y.data(), n));
      EXPECT_FALSE(all_finite(gy.get(), n)) << v << " at " << at;
      EXPECT_TRUE(all_finite(gy.get(), at)) << "the bad value lies past n=" << at;
    }
  // The largest finite float and subnormals are finite.
  const std::vector<float> edge = {std::numeric_limits<float>::max(),
                                   -std::numeric_limits<float>::max(),
                                   std::numeric_limits<float>::denorm_min(), 0.f, -0.f};
  OnGpu<float> gedge(edge);
  EXPECT_TRUE(all_finite(gedge.get(), int64_t(edge.size())));
}

}  // namespace reduce_cuda_test
}  // namespace mt
