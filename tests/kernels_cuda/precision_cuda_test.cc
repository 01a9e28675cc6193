// precision's CUDA twins against the CPU code: the same bit algorithms, so
// every output must equal the CPU's bit for bit (NaN payloads included),
// compared as integers. Inputs: edge values (signed zeros, subnormals, fp16's
// and bf16's rounding boundaries, 65504 / 65520, the float extremes, inf,
// NaNs) and random 32-bit patterns.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "kernels/precision.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace precision_cuda_test {

using test::OnGpu;

std::vector<uint32_t> bits_of(const std::vector<float>& x) {
  std::vector<uint32_t> out(x.size());
  std::memcpy(out.data(), x.data(), x.size() * sizeof(float));
  return out;
}

// Edge values, then n random bit patterns (every class of float, NaNs included).
std::vector<float> inputs(int64_t n) {
  std::vector<float> x = {
      0.f, -0.f, 1.f, -1.f, 0.5f, 65504.f, 65519.996f, 65520.f, -65520.f, 65536.f, 1e10f, -1e10f,
      0x1p-14f, 0x1p-15f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1.fffffep-15f, 0x1.0001p-24f,
      3e-8f, 6e-8f, std::numeric_limits<float>::denorm_min(),
      -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
      std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), INFINITY, -INFINITY,
      std::bit_cast<float>(0x7FC00000u), std::bit_cast<float>(0xFFC00001u),
      std::bit_cast<float>(0x7F800001u), std::bit_cast<float>(0x7FBFFFFFu),
      // bf16 ties: halfway between two bf16 values, even and odd
      std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u),
      std::bit_cast<float>(0x3F807FFFu), std::bit_cast<float>(0x7F7F8000u),
      std::bit_cast<float>(0x7F7FFFFFu),
      // fp16 ties: 1 + 2^-11 (to even: 1), 1 + 3 * 2^-11 (up)
      1.f + 0x1p-11f, 1.f + 0x1.8p-10f, 2049.f, 2051.f};
  const RngStream r = RngStream::make(7, "precision.cuda.bits");
  for (int64_t i = 0; i < n; ++i) {
    const Philox4 blk = r.block(uint64_t(i));
    x.push_back(std::bit_cast<float>(blk.v[0]));
  }
  // Values near fp16's range (exponents -26 .. 16), where its rounding acts.
  for (int64_t i = 0; i < n; ++i) {
    const Philox4 blk = r.block(uint64_t(n + i));
    const uint32_t exp = 127 - 26 + blk.v[1] % 43;
    x.push_back(std::bit_cast<float>((blk.v[0] & 0x807FFFFFu) | (exp << 23)));
  }
  return x;
}

TEST(PrecisionCuda, F32ToBf16) {
  MT_REQUIRE_GPU();
  const auto x = inputs(100000);
  const int64_t n = int64_t(x.size());
  std::vector<uint16_t> want(x.size());
  f32_to_bf16(want.data(), x.data(), n);
  OnGpu<float> gx(x);
  OnGpu<uint16_t> gy(std::vector<uint16_t>(x.size(), 0x1234));
  f32_to_bf16(gy.get(), gx.get(), n);
  EXPECT_EQ(gy.host(), want);
}

TEST(PrecisionCuda, Bf16ToF32EveryPattern) {
  MT_REQUIRE_GPU();
  std::vector<uint16_t> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(i);
  std::vector<float> want(x.size());
  bf16_to_f32(want.data(), x.data(), int64_t(x.size()));
  OnGpu<uint16_t> gx(x);
  OnGpu<float> gy(std::vector<float>(x.size(), 1.5f));
  bf16_to_f32(gy.get(), gx.get(), int64_t(x.size()));
  EXPECT_EQ(bits_of(gy.host()), bits_of(want));
}

TEST(PrecisionCuda, RoundToF16) {
  MT_REQUIRE_GPU();
  const auto x = inputs(200000);
  const int64_t n = int64_t(x.size());
  std::vector<float> want(x.size());
  round_to_f16(want.data(), x.data(), n);
  OnGpu<float> gx(x), gy(std::vector<float>(x.size(), 1.5f));
  round_to_f16(gy.get(), gx.get(), n);
  const auto got = bits_of(gy.host()), ref = bits_of(want);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(got[i], ref[i]) << "x = " << x[i] << " (bits " << std::hex
                              << std::bit_cast<uint32_t>(x[i]) << ")";
  round_to_f16(gx.get(), gx.get(), n);  // in place
  EXPECT_EQ(bits_of(gx.host()), ref);
}

TEST(PrecisionCuda, ConvertEveryStoragePair) {
  MT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(257), int64_t(100003)}) {
    auto x = inputs(n);
    x.resize(size_t(n));
    std::vector<uint16_t> xb(x.size());
    f32_to_bf16(xb.data(), x.data(), n);
    OnGpu<float> gx(x);
    OnGpu<uint16_t> gxb(xb);
    const std::vector<float> nan_f(x.size(), NAN);
    const std::vector<uint16_t> nan_b(x.size(), 0x7FC0);

    std::vector<float> want_ff(x.size()), want_bf(x.size());
    std::vector<uint16_t> want_fb(x.size()), want_bb(x.size());
    convert(want_ff.data(), x.data(), n);
    convert(want_bf.data(), xb.data(), n);
    convert(want_fb.data(), x.data(), n);
    convert(want_bb.data(), xb.data(), n);
    OnGpu<float> ff(nan_f), bf(nan_f);
    OnGpu<uint16_t> fb(nan_b), bb(nan_b);
    convert(ff.get(), gx.get(), n);
    convert(bf.get(), gxb.get(), n);
    convert(fb.get(), gx.get(), n);
    convert(bb.get(), gxb.get(), n);
    EXPECT_EQ(bits_of(ff.host()), bits_of(want_ff)) << "fp32 -> fp32, n=" << n;
    EXPECT_EQ(bits_of(bf.host()), bits_of(want_bf)) << "bf16 -> fp32, n=" << n;
    EXPECT_EQ(fb.host(), want_fb) << "fp32 -> bf16, n=" << n;
    EXPECT_EQ(bb.host(), want_bb) << "bf16 -> bf16, n=" << n;
  }
}

}  // namespace precision_cuda_test
}  // namespace mt
