// squared_relu's CUDA twin against its CPU code: the same arithmetic, so
// fp32 results agree to rounding (1e-6) and bf16-stored ones to one bf16 step.
#include <cmath>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/squared_relu.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace squared_relu_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::to_bf16;
using test::widen_bf16;

const int64_t kSizes[] = {1, 7, 257, 100003};

TEST(SquaredReluCuda, Forward) {
  MT_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    const auto x = test::randn(n, "srelu.cuda.x", 3.f);
    std::vector<float> want(static_cast<size_t>(n));
    squared_relu_forward(want.data(), x.data(), n);
    OnGpu<float> gx(x), gy(std::vector<float>(size_t(n), NAN));
    squared_relu_forward(gy.get(), gx.get(), n);
    EXPECT_LE(rel_max_err(gy.host(), want), 1e-6) << "n=" << n;
    const auto xb = to_bf16(x);
    std::vector<uint16_t> want_b(static_cast<size_t>(n));
    squared_relu_forward(want_b.data(), xb.data(), n);
    OnGpu<uint16_t> gxb(xb), gyb(std::vector<uint16_t>(size_t(n), 0x7FC0));
    squared_relu_forward(gyb.get(), gxb.get(), n);
    EXPECT_LE(rel_max_err(widen_bf16(gyb.host()), widen_bf16(want_b)), 1e-2) << "n=" << n;
  }
}

TEST(SquaredReluCuda, Backward) {
  MT_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    const auto x = test::randn(n, "srelu.cuda.bx", 3.f), dy = test::randn(n, "srelu.cuda.dy");
    std::vector<float> want(static_cast<size_t>(n));
    squared_relu_backward(want.data(), x.data(), dy.data(), n);
    OnGpu<float> gx(x), gdy(dy), gdx(std::vector<float>(size_t(n), NAN));
    squared_relu_backward(gdx.get(), gx.get(), gdy.get(), n);
    EXPECT_LE(rel_max_err(gdx.host(), want), 1e-6) << "n=" << n;
  }
}

}  // namespace squared_relu_cuda_test
}  // namespace mt
