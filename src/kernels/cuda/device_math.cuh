// Device helpers shared by the element-wise CUDA twins: fp32 / bf16 element
// access with the CPU's rounding (precision.h), the CPU's fp16 rounding, and a
// device port of Philox4x32-10 / RngStream::uniform (core/rng.h) that draws
// bit-identical numbers, so a dropout mask on the GPU is the CPU's mask.
//
// Floating-point arithmetic elsewhere follows the CPU code's operation order;
// both compilers may contract a * b + c into one FMA (g++ does with
// -march=native), so such results agree to round-off, not bit for bit.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace mt::cuda {

// ---- fp32 / bf16 storage ---------------------------------------------------

// bf16 of x, round to nearest even; NaN stays a quiet NaN (precision.h's
// bf16_from_f32, the same bit algorithm).
__device__ __forceinline__ uint16_t bf16_of(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}
__device__ __forceinline__ float f32_of(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// Element i widened to fp32; element i = x, rounded for bf16 storage.
__device__ __forceinline__ float ld_f32(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld_f32(const uint16_t* p, int64_t i) { return f32_of(p[i]); }
__device__ __forceinline__ void st_f32(float* p, int64_t i, float x) { p[i] = x; }
__device__ __forceinline__ void st_f32(uint16_t* p, int64_t i, float x) { p[i] = bf16_of(x); }

// ---- fp16 rounding ---------------------------------------------------------

// precision.h's f16_round, the same bit algorithm: the nearest fp16 value of x
// as a float (ties to even, |x| >= 65520 -> inf, subnormals kept, NaN kept).
__device__ __forceinline__ float f16_round_dev(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7FFFFFFFu;
  const float ax = __uint_as_float(mag);
  const uint32_t normal = (mag + 0x0FFFu + ((mag >> 13) & 1u)) & ~0x1FFFu;
  const float sub = __fsub_rn(__fadd_rn(ax, 0.5f), 0.5f);  // spacing 2^-24, ties to even
  float r = ax < 0x1p-14f ? sub : __uint_as_float(normal);
  r = r >= 65536.f ? __uint_as_float(0x7F800000u) : r;
  const float out = __uint_as_float(__float_as_uint(r) | sign);
  return mag > 0x7F800000u ? x : out;
}

// ---- Philox4x32-10 (core/rng.h) --------------------------------------------

// The key and step of an RngStream, as a kernel argument.
struct PhiloxKey {
  uint32_t k0, k1;
  uint64_t step;
};

// Four words of block `block`: RngStream::block, bit for bit.
__device__ __forceinline__ uint4 philox_block(const PhiloxKey& key, uint64_t block) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = uint32_t(block), c1 = uint32_t(block >> 32);
  uint32_t c2 = uint32_t(key.step), c3 = uint32_t(key.step >> 32);
  uint32_t k0 = key.k0, k1 = key.k1;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return make_uint4(c0, c1, c2, c3);
}

// Word w (0..3) of a block.
__device__ __forceinline__ uint32_t philox_word(const uint4& r, int w) {
  return w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
}

// A word mapped to [0, 1) with 24 bits, as RngStream::uniform (exact: a 24-bit
// integer times 2^-24).
__device__ __forceinline__ float uniform_of_word(uint32_t word) {
  return __uint2float_rn(word >> 8) * (1.0f / 16777216.0f);
}

// RngStream::uniform(index).
__device__ __forceinline__ float philox_uniform(const PhiloxKey& key, uint64_t index) {
  return uniform_of_word(philox_word(philox_block(key, index >> 2), int(index & 3)));
}

}  // namespace mt::cuda
