// dropout's CUDA twin against its CPU code. The masks must be the CPU's bit
// for bit (same Philox words of the same global indices): compared exactly
// (zero count and positions), and so are dropout_forward / dropout_backward
// (one float product per element, fp32 or bf16-rounded). dropout_add_forward
// (r + x * mul, maybe one FMA on either side) to rel_max_err 1e-6 in fp32 and
// 1e-2 in bf16 storage (a float an ulp off can round to the neighbouring bf16).
#include <cmath>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace dropout_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::to_bf16;
using test::widen_bf16;


// A local shard (s_local, b, h_local) of a global (s_global, ., h_global)
// activation, with offsets that are not multiples of 4 (Philox blocks).
struct Case {
  int64_t s_local, b, h_local, s_global, t0, h_global, h0, sample0;
  float p;
};
const Case kCases[] = {
    {1, 1, 1, 1, 0, 1, 0, 0, 0.5f},       {16, 3, 40, 16, 0, 40, 0, 5, 0.1f},
    {7, 3, 29, 16, 3, 40, 5, 6, 0.3f},    {5, 2, 257, 9, 4, 1030, 771, 11, 0.5f},
    {3, 4, 1025, 3, 0, 1025, 0, 1, 0.9f}, {2, 1, 4099, 8, 5, 8200, 4101, 123456789, 0.25f},
};

DropoutSpec spec_of(const Case& c) {
  DropoutSpec d;
  d.rng = RngStream::make(1234, "decoder.layers.3.hidden_dropout", /*step=*/7);
  d.p = c.p;
  d.s_global = c.s_global;
  d.t0 = c.t0;
  d.h_global = c.h_global;
  d.h0 = c.h0;
  d.sample0 = c.sample0;
  return d;
}

std::string name_of(const Case& c) {
  return "(" + std::to_string(c.s_local) + ", " + std::to_string(c.b) + ", " +
         std::to_string(c.h_local) + ") p=" + std::to_string(c.p);
}

// Positions of the zeros (the dropped elements; x is randn, so never 0 itself).
std::vector<size_t> zeros_of(const std::vector<float>& y) {
  std::vector<size_t> z;
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] == 0.f) z.push_back(i);
  return z;
}

TEST(DropoutCuda, ForwardMaskIsTheCpuMask) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    const DropoutSpec d = spec_of(c);
    const int64_t n = c.s_local * c.b * c.h_local;
    const auto x = test::randn(n, "dropout.cuda.x");
    std::vector<float> want(x.size());
    dropout_forward(want.data(), x.data(), c.s_local, c.b, c.h_local, d);
    OnGpu<float> gx(x), gy(std::vector<float>(x.size(), NAN));  // NaN: every element written
    dropout_forward(gy.get(), gx.get(), c.s_local, c.b, c.h_local, d);
    const auto got = gy.host();
    const auto zw = zeros_of(want), zg = zeros_of(got);
    EXPECT_EQ(zg.size(), zw.size()) << name_of(c);
    EXPECT_EQ(zg, zw) << name_of(c);
    EXPECT_EQ(got, want) << name_of(c);
    // In place (out aliases x), and bf16 storage of the output.
    dropout_forward(gx.get(), gx.get(), c.s_local, c.b, c.h_local, d);
    EXPECT_EQ(gx.host(), want) << "in place, " << name_of(c);
    std::vector<uint16_t> want_b(x.size());
    dropout_forward(want_b.data(), x.data(), c.s_local, c.b, c.h_local, d);
    OnGpu<float> gx2(x);
    OnGpu<uint16_t> gyb(std::vector<uint16_t>(x.size(), 0x7FC0));
    dropout_forward(gyb.get(), gx2.get(), c.s_local, c.b, c.h_local, d);
    EXPECT_EQ(gyb.host(), want_b) << "bf16 out, " << name_of(c);
  }
}

TEST(DropoutCuda, MaskIsDropoutKeepOfTheGlobalIndex) {
  MT_REQUIRE_GPU();
  const Case c = kCases[3];
  const DropoutSpec d = spec_of(c);
  const int64_t n = c.s_local * c.b * c.h_local;
  OnGpu<float> ones(std::vector<float>(size_t(n), 1.f)), gy(n);
  dropout_forward(gy.get(), ones.get(), c.s_local, c.b, c.h_local, d);
  const auto got = gy.host();
  const float scale = float(1.0 / (1.0 - c.p));
  for (int64_t t = 0; t < c.s_local; ++t)
    for (int64_t bi = 0; bi < c.b; ++bi)
      for (int64_t j = 0; j < c.h_local; ++j) {
        const uint64_t g =
            uint64_t(((c.sample0 + bi) * c.s_global + c.t0 + t) * c.h_global + c.h0 + j);
        ASSERT_EQ(got[size_t((t * c.b + bi) * c.h_local + j)],
                  dropout_keep(d.rng, c.p, g) ? scale : 0.f)
            << "t=" << t << " bi=" << bi << " j=" << j;
      }
}

TEST(DropoutCuda, Backward) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    const DropoutSpec d = spec_of(c);
    const int64_t n = c.s_local * c.b * c.h_local;
    const auto dy = test::randn(n, "dropout.cuda.dy");
    std::vector<float> want(dy.size());
    dropout_backward(want.data(), dy.data(), c.s_local, c.b, c.h_local, d);
    OnGpu<float> gdy(dy), gdx(std::vector<float>(dy.size(), NAN));
    dropout_backward(gdx.get(), gdy.get(), c.s_local, c.b, c.h_local, d);
    const auto got = gdx.host();
    EXPECT_EQ(zeros_of(got), zeros_of(want)) << name_of(c);
    EXPECT_EQ(got, want) << name_of(c);
    dropout_backward(gdy.get(), gdy.get(), c.s_local, c.b, c.h_local, d);  // in place
    EXPECT_EQ(gdy.host(), want) << "in place, " << name_of(c);
  }
}

TEST(DropoutCuda, AddForward) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    const DropoutSpec d = spec_of(c);
    const int64_t n = c.s_local * c.b * c.h_local;
    const auto x = test::randn(n, "dropout.cuda.ax");
    const auto r = test::randn(n, "dropout.cuda.res");
    const auto rb = to_bf16(r);
    OnGpu<float> gx(x), gr(r);
    OnGpu<uint16_t> grb(rb);
    // fp32 residual and output
    std::vector<float> want(x.size());
    dropout_add_forward(want.data(), x.data(), r.data(), c.s_local, c.b, c.h_local, d);
    OnGpu<float> gy(std::vector<float>(x.size(), NAN));
    dropout_add_forward(gy.get(), gx.get(), gr.get(), c.s_local, c.b, c.h_local, d);
    EXPECT_LE(rel_max_err(gy.host(), want), 1e-6) << name_of(c);
    // The mask: out - residual is 0 exactly where the CPU dropped.
    {
      const auto got = gy.host();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i] == r[i], want[i] == r[i]) << name_of(c) << " element " << i;
    }
    // bf16 residual stream, updated in place (out aliases residual)
    std::vector<uint16_t> want_b = rb;
    dropout_add_forward(want_b.data(), x.data(), want_b.data(), c.s_local, c.b, c.h_local, d);
    dropout_add_forward(grb.get(), gx.get(), grb.get(), c.s_local, c.b, c.h_local, d);
    EXPECT_LE(rel_max_err(widen_bf16(grb.host()), widen_bf16(want_b)), 1e-2)
        << "bf16, " << name_of(c);
    // fp32 output of a bf16 residual
    std::vector<float> want_fb(x.size());
    dropout_add_forward(want_fb.data(), x.data(), rb.data(), c.s_local, c.b, c.h_local, d);
    OnGpu<uint16_t> grb2(rb);
    OnGpu<float> gy2(std::vector<float>(x.size(), NAN));
    dropout_add_forward(gy2.get(), gx.get(), grb2.get(), c.s_local, c.b, c.h_local, d);
    EXPECT_LE(rel_max_err(gy2.host(), want_fb), 1e-6) << "bf16 residual, " << name_of(c);
  }
}

TEST(DropoutCuda, ZeroProbabilityIsIdentity) {
  MT_REQUIRE_GPU();
  Case c = kCases[2];
  c.p = 0.f;
  const DropoutSpec d = spec_of(c);
  const int64_t n = c.s_local * c.b * c.h_local;
  const auto x = test::randn(n, "dropout.cuda.zx");
  const auto r = test::randn(n, "dropout.cuda.zr");
  OnGpu<float> gx(x), gr(r), gy(std::vector<float>(x.size(), NAN));
  dropout_forward(gy.get(), gx.get(), c.s_local, c.b, c.h_local, d);
  EXPECT_EQ(gy.host(), x);
  OnGpu<uint16_t> gyb(std::vector<uint16_t>(x.size(), 0x7FC0));
  dropout_forward(gyb.get(), gx.get(), c.s_local, c.b, c.h_local, d);
  EXPECT_EQ(gyb.host(), to_bf16(x));
  OnGpu<float> gdx(std::vector<float>(x.size(), NAN));
  dropout_backward(gdx.get(), gx.get(), c.s_local, c.b, c.h_local, d);
  EXPECT_EQ(gdx.host(), x);
  std::vector<float> want(x.size());
  dropout_add_forward(want.data(), x.data(), r.data(), c.s_local, c.b, c.h_local, d);
  dropout_add_forward(gy.get(), gx.get(), gr.get(), c.s_local, c.b, c.h_local, d);
  EXPECT_EQ(gy.host(), want);  // one addition: exact
}

}  // namespace dropout_cuda_test
}  // namespace mt
