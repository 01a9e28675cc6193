// layout's CUDA twin against its CPU code: copies, bf16 rounding and the group
// sums of heads_to_qkv (added in head order on both sides) are the same float
// operations, so every output must equal the CPU's exactly. Outputs start as
// NaN (every element must be written). Each case runs with d a multiple of 4
// on 16-byte aligned buffers (float4 path) and, shifted by one float, on
// unaligned ones (scalar path).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/layout.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace layout_cuda_test {

using test::OnGpu;

struct Case {
  int64_t s, b, a, g, d;
};
// g = a: GPT-2's per-head interleave; g < a: grouped queries; g = 1: multi-query.
const Case kCases[] = {{1, 1, 1, 1, 1},   {5, 3, 4, 4, 8}, {7, 2, 8, 2, 12},   {3, 2, 6, 3, 5},
                       {9, 1, 12, 1, 64}, {4, 3, 4, 2, 6}, {33, 2, 16, 4, 128}};

std::string name_of(const Case& c, int64_t shift) {
  return "s=" + std::to_string(c.s) + " b=" + std::to_string(c.b) + " a=" + std::to_string(c.a) +
         " g=" + std::to_string(c.g) + " d=" + std::to_string(c.d) +
         " shift=" + std::to_string(shift);
}

// A GPU buffer holding `host` at element offset `shift` (shift 1: not 16-byte aligned).
template <class T>
OnGpu<T> gpu_at(const std::vector<T>& host, int64_t shift, T fill) {
  std::vector<T> padded(host.size() + size_t(shift), fill);
  std::copy(host.begin(), host.end(), padded.begin() + shift);
  return OnGpu<T>(padded);
}
template <class T>
std::vector<T> host_at(const OnGpu<T>& g, int64_t shift) {
  const auto all = g.host();
  return std::vector<T>(all.begin() + shift, all.end());
}

TEST(LayoutCuda, QkvToHeadsAndBack) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases)
    for (int64_t shift : {0, 1}) {
      const int64_t nqkv = c.s * c.b * (c.a + 2 * c.g) * c.d, nh = c.b * c.a * c.s * c.d;
      const auto qkv = test::randn(nqkv, "layout.cuda.qkv");
      std::vector<float> q(size_t(nh), 0.f), k = q, v = q;
      qkv_to_heads(q.data(), k.data(), v.data(), qkv.data(), c.s, c.b, c.a, c.g, c.d);
      const std::vector<float> nan_h(size_t(nh), NAN);
      OnGpu<float> gqkv = gpu_at(qkv, shift, 0.f);
      OnGpu<float> gq = gpu_at(nan_h, shift, 0.f), gk = gpu_at(nan_h, shift, 0.f),
                   gv = gpu_at(nan_h, shift, 0.f);
      qkv_to_heads(gq.get() + shift, gk.get() + shift, gv.get() + shift, gqkv.get() + shift, c.s,
                   c.b, c.a, c.g, c.d);
      EXPECT_EQ(host_at(gq, shift), q) << "q, " << name_of(c, shift);
      EXPECT_EQ(host_at(gk, shift), k) << "k, " << name_of(c, shift);
      EXPECT_EQ(host_at(gv, shift), v) << "v, " << name_of(c, shift);

      // Backward: independent gradients per head, so the group sums are real sums.
      const auto dq = test::randn(nh, "layout.cuda.dq"), dk = test::randn(nh, "layout.cuda.dk"),
                 dv = test::randn(nh, "layout.cuda.dv");
      std::vector<float> dqkv(size_t(nqkv), 0.f);
      heads_to_qkv(dqkv.data(), dq.data(), dk.data(), dv.data(), c.s, c.b, c.a, c.g, c.d);
      OnGpu<float> gdq = gpu_at(dq, shift, 0.f), gdk = gpu_at(dk, shift, 0.f),
                   gdv = gpu_at(dv, shift, 0.f);
      OnGpu<float> gdqkv = gpu_at(std::vector<float>(size_t(nqkv), NAN), shift, 0.f);
      heads_to_qkv(gdqkv.get() + shift, gdq.get() + shift, gdk.get() + shift, gdv.get() + shift,
                   c.s, c.b, c.a, c.g, c.d);
      EXPECT_EQ(host_at(gdqkv, shift), dqkv) << "dqkv, " << name_of(c, shift);
    }
}

TEST(LayoutCuda, HeadsToSbhAndBack) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases)
    for (int64_t shift : {0, 1}) {
      const int64_t n = c.s * c.b * c.a * c.d;
      const auto x = test::randn(n, "layout.cuda.heads");
      std::vector<float> want(static_cast<size_t>(n));
      heads_to_sbh(want.data(), x.data(), c.s, c.b, c.a, c.d);
      OnGpu<float> gx = gpu_at(x, shift, 0.f);
      OnGpu<float> gy = gpu_at(std::vector<float>(size_t(n), NAN), shift, 0.f);
      heads_to_sbh(gy.get() + shift, gx.get() + shift, c.s, c.b, c.a, c.d);
      EXPECT_EQ(host_at(gy, shift), want) << "fp32, " << name_of(c, shift);

      std::vector<uint16_t> want_b(static_cast<size_t>(n));
      heads_to_sbh(want_b.data(), x.data(), c.s, c.b, c.a, c.d);
      OnGpu<uint16_t> gyb =
          gpu_at(std::vector<uint16_t>(size_t(n), uint16_t(0x7FC0)), shift, uint16_t(0));
      heads_to_sbh(gyb.get() + shift, gx.get() + shift, c.s, c.b, c.a, c.d);
      EXPECT_EQ(host_at(gyb, shift), want_b) << "bf16, " << name_of(c, shift);

      std::vector<float> back(static_cast<size_t>(n));
      sbh_to_heads(back.data(), want.data(), c.s, c.b, c.a, c.d);
      EXPECT_EQ(back, x);  // the CPU pair is a round trip
      OnGpu<float> gback = gpu_at(std::vector<float>(size_t(n), NAN), shift, 0.f);
      sbh_to_heads(gback.get() + shift, gy.get() + shift, c.s, c.b, c.a, c.d);
      EXPECT_EQ(host_at(gback, shift), back) << "sbh_to_heads, " << name_of(c, shift);
    }
}

}  // namespace layout_cuda_test
}  // namespace mt
