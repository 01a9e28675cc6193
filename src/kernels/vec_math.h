// Element-wise math written so that GCC vectorises it inside `#pragma omp simd`
// loops (glibc's expf/tanhf are only vectorised under -ffast-math). Internal to
// src/kernels; accuracy is checked against libm in tests/kernels/vec_math_test.cc.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

namespace mt {

// exp(x) for float, within ~2 ulp of libm's expf for results in the normal
// range; underflows to 0 (via denormals) below ~-104 and overflows to +inf
// above ~88.7, like expf. NaN in gives NaN out.
#pragma omp declare simd
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860676533018708e-06f;
  constexpr float kRound = 12582912.f;          // 1.5 * 2^23: adding it rounds to an integer
  x = std::min(std::max(x, -104.f), 89.f);
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;  // |r| <= ln2 / 2
  // Taylor series to r^7: truncation error < 6e-9 relative on |r| <= 0.347.
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  // 2^n as two normal powers of two so that n in [-150, 129] neither wraps
  // the exponent field nor needs a branch: products round to 0 / inf as expf.
  const int32_t ni = int32_t(n);
  const int32_t n1 = ni / 2, n2 = ni - n1;
  const float s1 = std::bit_cast<float>(uint32_t(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(uint32_t(n2 + 127) << 23);
  return p * s1 * s2;
}

// Largest of x[0..n) (n >= 1); exact in any order, so a SIMD reduction.
// Written as a comparison: GCC 12 keeps `mx = std::max(mx, x[j])` under
// `omp simd reduction(max)` a scalar chain (20x slower). With a NaN in x the
// result is unspecified (whatever uses it turns NaN anyway).
inline float row_max(const float* x, int64_t n) {
  float mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = mx > x[j] ? mx : x[j];
  return mx;
}

}  // namespace mt
