// gelu's CUDA twin against its CPU code. Tolerances (rel_max_err: max abs
// error over max |CPU value|): fp32 outputs 1e-5 (CUDA's expf and the CPU's
// exp_f32 differ by a few ulp), bf16-stored outputs 1e-2 (a float a few ulp
// off can round to the neighbouring bf16, 2^-8 relative).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/gelu.h"
#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace gelu_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::to_bf16;
using test::widen_bf16;


const int64_t kSizes[] = {1, 7, 255, 257, 1025, 100003};

TEST(GeluCuda, ForwardFp32) {
  MT_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    const auto x = test::randn(n, "gelu.cuda.x", 3.f);
    std::vector<float> want(static_cast<size_t>(n));
    gelu_forward(want.data(), x.data(), n);
    OnGpu<float> dx(x), dout(std::vector<float>(size_t(n), NAN));  // NaN: every element written
    gelu_forward(dout.get(), dx.get(), n);
    EXPECT_LE(rel_max_err(dout.host(), want), 1e-5) << "n=" << n;
  }
}

TEST(GeluCuda, ForwardBf16Storage) {
  MT_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    const auto xf = test::randn(n, "gelu.cuda.xb", 3.f);
    const auto xb = to_bf16(xf);
    OnGpu<float> gxf(xf);
    OnGpu<uint16_t> gxb(xb);
    const std::vector<uint16_t> nan_bf16(size_t(n), 0x7FC0);
    // bf16 in, bf16 out
    std::vector<uint16_t> want_bb(static_cast<size_t>(n));
    gelu_forward(want_bb.data(), xb.data(), n);
    OnGpu<uint16_t> out_bb(nan_bf16);
    gelu_forward(out_bb.get(), gxb.get(), n);
    EXPECT_LE(rel_max_err(widen_bf16(out_bb.host()), widen_bf16(want_bb)), 1e-2) << "n=" << n;
    // fp32 in, bf16 out
    std::vector<uint16_t> want_fb(static_cast<size_t>(n));
    gelu_forward(want_fb.data(), xf.data(), n);
    OnGpu<uint16_t> out_fb(nan_bf16);
    gelu_forward(out_fb.get(), gxf.get(), n);
    EXPECT_LE(rel_max_err(widen_bf16(out_fb.host()), widen_bf16(want_fb)), 1e-2) << "n=" << n;
    // bf16 in, fp32 out
    std::vector<float> want_bf(static_cast<size_t>(n));
    gelu_forward(want_bf.data(), xb.data(), n);
    OnGpu<float> out_bf(std::vector<float>(size_t(n), NAN));
    gelu_forward(out_bf.get(), gxb.get(), n);
    EXPECT_LE(rel_max_err(out_bf.host(), want_bf), 1e-5) << "n=" << n;
  }
}

TEST(GeluCuda, Backward) {
  MT_REQUIRE_GPU();
  for (int64_t n : kSizes) {
    const auto x = test::randn(n, "gelu.cuda.bx", 3.f);
    const auto xb = to_bf16(x);
    const auto dy = test::randn(n, "gelu.cuda.dy");
    std::vector<float> want(static_cast<size_t>(n)), want_b(static_cast<size_t>(n));
    gelu_backward(want.data(), x.data(), dy.data(), n);
    gelu_backward(want_b.data(), xb.data(), dy.data(), n);
    OnGpu<float> gx(x), gdy(dy), gdx(std::vector<float>(size_t(n), NAN));
    OnGpu<uint16_t> gxb(xb);
    gelu_backward(gdx.get(), gx.get(), gdy.get(), n);
    EXPECT_LE(rel_max_err(gdx.host(), want), 1e-5) << "n=" << n;
    gelu_backward(gdx.get(), gxb.get(), gdy.get(), n);
    EXPECT_LE(rel_max_err(gdx.host(), want_b), 1e-5) << "bf16 input, n=" << n;
    // In place: dinp aliases dout.
    gelu_backward(gdy.get(), gx.get(), gdy.get(), n);
    EXPECT_LE(rel_max_err(gdy.host(), want), 1e-5) << "in place, n=" << n;
  }
}

TEST(GeluCuda, ExtremeInputs) {
  MT_REQUIRE_GPU();
  const std::vector<float> x = {0.f,    -0.f,  1e-30f, -1e-30f,  20.f,      -20.f, 100.f,
                                -100.f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
  const int64_t n = int64_t(x.size());
  std::vector<float> want(x.size());
  gelu_forward(want.data(), x.data(), n);
  OnGpu<float> gx(x), gy(n);
  gelu_forward(gy.get(), gx.get(), n);
  const auto got = gy.host();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "x=" << x[i];
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "x=" << x[i];
      continue;
    }
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.f, std::fabs(want[i]))) << "x=" << x[i];
  }
}

}  // namespace gelu_cuda_test
}  // namespace mt
