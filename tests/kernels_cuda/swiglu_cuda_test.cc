// swiglu's CUDA twin against its CPU code. Tolerances (rel_max_err: max abs
// error over max |CPU value|): fp32 outputs 1e-5 (CUDA's expf and the CPU's
// exp_f32 differ by a few ulp), bf16-stored outputs 1e-2 (a float a few ulp
// off can round to the neighbouring bf16, 2^-8 relative).
#include <cmath>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/swiglu.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace swiglu_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::to_bf16;
using test::widen_bf16;


struct Shape {
  int64_t n, f;
};
const Shape kShapes[] = {{1, 1}, {3, 7}, {5, 257}, {64, 300}, {17, 1000}, {2, 4099}};

TEST(SwigluCuda, Forward) {
  MT_REQUIRE_GPU();
  for (const Shape& sh : kShapes) {
    const size_t nin = size_t(sh.n * 2 * sh.f), nout = size_t(sh.n * sh.f);
    const auto x = test::randn(int64_t(nin), "swiglu.cuda.x", 3.f);
    const auto xb = to_bf16(x);
    OnGpu<float> gx(x);
    OnGpu<uint16_t> gxb(xb);
    const std::vector<float> nan_f(nout, NAN);  // poison: every element must be written
    const std::vector<uint16_t> nan_b(nout, 0x7FC0);

    std::vector<float> want(nout), want_b(nout);
    swiglu_forward(want.data(), x.data(), sh.n, sh.f);
    swiglu_forward(want_b.data(), xb.data(), sh.n, sh.f);
    OnGpu<float> out(nan_f), out_b(nan_f);
    swiglu_forward(out.get(), gx.get(), sh.n, sh.f);
    swiglu_forward(out_b.get(), gxb.get(), sh.n, sh.f);
    EXPECT_LE(rel_max_err(out.host(), want), 1e-5) << "n=" << sh.n << " f=" << sh.f;
    EXPECT_LE(rel_max_err(out_b.host(), want_b), 1e-5) << "bf16 in, n=" << sh.n << " f=" << sh.f;

    std::vector<uint16_t> want_fb(nout), want_bb(nout);
    swiglu_forward(want_fb.data(), x.data(), sh.n, sh.f);
    swiglu_forward(want_bb.data(), xb.data(), sh.n, sh.f);
    OnGpu<uint16_t> out_fb(nan_b), out_bb(nan_b);
    swiglu_forward(out_fb.get(), gx.get(), sh.n, sh.f);
    swiglu_forward(out_bb.get(), gxb.get(), sh.n, sh.f);
    EXPECT_LE(rel_max_err(widen_bf16(out_fb.host()), widen_bf16(want_fb)), 1e-2)
        << "bf16 out, n=" << sh.n << " f=" << sh.f;
    EXPECT_LE(rel_max_err(widen_bf16(out_bb.host()), widen_bf16(want_bb)), 1e-2)
        << "bf16 in and out, n=" << sh.n << " f=" << sh.f;
  }
}

TEST(SwigluCuda, Backward) {
  MT_REQUIRE_GPU();
  for (const Shape& sh : kShapes) {
    const size_t nin = size_t(sh.n * 2 * sh.f), nout = size_t(sh.n * sh.f);
    const auto x = test::randn(int64_t(nin), "swiglu.cuda.bx", 3.f);
    const auto xb = to_bf16(x);
    const auto dy = test::randn(int64_t(nout), "swiglu.cuda.dy");
    std::vector<float> want(nin), want_b(nin);
    swiglu_backward(want.data(), x.data(), dy.data(), sh.n, sh.f);
    swiglu_backward(want_b.data(), xb.data(), dy.data(), sh.n, sh.f);
    OnGpu<float> gx(x), gdy(dy), gdin(std::vector<float>(nin, NAN)),
        gdin_b(std::vector<float>(nin, NAN));
    OnGpu<uint16_t> gxb(xb);
    swiglu_backward(gdin.get(), gx.get(), gdy.get(), sh.n, sh.f);
    swiglu_backward(gdin_b.get(), gxb.get(), gdy.get(), sh.n, sh.f);
    EXPECT_LE(rel_max_err(gdin.host(), want), 1e-5) << "n=" << sh.n << " f=" << sh.f;
    EXPECT_LE(rel_max_err(gdin_b.host(), want_b), 1e-5) << "bf16 in, n=" << sh.n << " f=" << sh.f;
  }
}

}  // namespace swiglu_cuda_test
}  // namespace mt
