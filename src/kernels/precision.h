// Mixed precision: low-precision GEMM operands (bf16, or fp16 emulated), fp32
// accumulation and fp32 outputs. In bf16 runs the model's weights are stored
// in bf16 (ReadView) and every kernel reads them so, as it reads the saved
// activations (bf16 in bf16 runs but for statistics); the arithmetic of
// everything that is not a matrix multiply (norms, softmax, GELU, optimizer,
// gradients' accumulation) stays fp32.
//
// bf16 is stored as the upper 16 bits of an IEEE float (uint16_t here); fp16
// is never stored: round_to_f16 gives the fp32 value of the nearest fp16,
// which is all the emulated fp16 GEMM needs (see matmul.cc).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>

namespace mt {

enum class MathMode : uint8_t { kF32, kBF16, kF16 };

// "fp32", "bf16", "fp16"
const char* math_mode_name(MathMode m);

// One value, inline so that loops over them vectorise (`#pragma omp simd`).
// bf16 of x, rounded to nearest, ties to even; NaN stays a (quiet) NaN, a
// finite value that rounds above the bf16 range becomes ±inf.
#pragma omp declare simd
inline uint16_t bf16_from_f32(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;  // keep sign and top payload, set quiet bit
  return uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

#pragma omp declare simd
inline float f32_from_bf16(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// The nearest IEEE fp16 value of x (ties to even), as a float: |x| >= 65520
// becomes ±inf, fp16 subnormals (multiples of 2^-24) are kept, NaN stays NaN.
#pragma omp declare simd
inline float f16_round(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7FFFFFFFu;
  const float ax = std::bit_cast<float>(mag);
  // Normal fp16 range: keep 11 significant bits (drop 13 of fp32's 24),
  // rounding to nearest even; a carry into the exponent is correct.
  const uint32_t normal = (mag + 0x0FFFu + ((mag >> 13) & 1u)) & ~0x1FFFu;
  // Below 2^-14 the fp16 spacing is a fixed 2^-24, the fp32 spacing in
  // [0.5, 1): adding and removing 0.5 rounds to it (ties to even, exactly).
  const float sub = (ax + 0.5f) - 0.5f;
  float r = ax < 0x1p-14f ? sub : std::bit_cast<float>(normal);
  r = r >= 65536.f ? std::bit_cast<float>(0x7F800000u) : r;  // 65520 and up round to inf
  const float out = std::bit_cast<float>(std::bit_cast<uint32_t>(r) | sign);
  return mag > 0x7F800000u ? x : out;
}

// out[i] = bf16 of in[i] (as bf16_from_f32). OpenMP over chunks.
void f32_to_bf16(uint16_t* out, const float* in, int64_t n);
// out[i] = in[i] widened to fp32 (exact).
void bf16_to_f32(float* out, const uint16_t* in, int64_t n);
// out[i] = f16_round(in[i]); out may equal in.
void round_to_f16(float* out, const float* in, int64_t n);

// True if the CPU has native bf16 dot products (AVX512_BF16 or AMX-BF16) and
// the OS saves the AVX-512 state; otherwise oneDNN emulates bf16 (slowly).
bool cpu_has_native_bf16();

// An array as the kernels read it: fp32, or bf16 storage. In bf16 runs the
// model's weights (the only copy the model holds then: the fp32 main weights
// live in the optimizer) and its saved activations are bf16. Exactly one
// pointer is set, or none (an absent bias).
struct ReadView {
  const float* f32 = nullptr;      // fp32 storage, or
  const uint16_t* bf16 = nullptr;  // bf16 storage
  ReadView() = default;
  ReadView(std::nullptr_t) {}  // NOLINT: nothing (an absent bias)
  ReadView(const float* p) : f32(p) {}  // NOLINT: fp32 arrays convert implicitly
  ReadView(const uint16_t* p) : bf16(p) {}  // NOLINT
  explicit operator bool() const { return f32 != nullptr || bf16 != nullptr; }
  bool operator==(const ReadView&) const = default;
  const void* raw() const { return bf16 ? static_cast<const void*>(bf16) : f32; }  // either pointer
  ReadView at(int64_t offset) const {  // the view `offset` elements in
    return bf16 ? ReadView(bf16 + offset) : f32 ? ReadView(f32 + offset) : ReadView();
  }
};

// The same, writable: where a kernel stores its output (bf16 outputs are
// rounded to nearest even).
struct WriteView {
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
  WriteView() = default;
  WriteView(std::nullptr_t) {}  // NOLINT
  WriteView(float* p) : f32(p) {}  // NOLINT
  WriteView(uint16_t* p) : bf16(p) {}  // NOLINT
  explicit operator bool() const { return f32 != nullptr || bf16 != nullptr; }
  operator ReadView() const { return bf16 ? ReadView(bf16) : ReadView(f32); }  // NOLINT
  void* raw() const { return bf16 ? static_cast<void*>(bf16) : f32; }  // either pointer
  WriteView at(int64_t offset) const {
    return bf16 ? WriteView(bf16 + offset) : f32 ? WriteView(f32 + offset) : WriteView();
  }
};

// Element i of either storage, widened to fp32 (inline: vectorises in simd loops).
#pragma omp declare simd
inline float load_f32(const float* p, int64_t i) { return p[i]; }
#pragma omp declare simd
inline float load_f32(const uint16_t* p, int64_t i) { return f32_from_bf16(p[i]); }
// Element i = x, rounded for bf16 storage.
#pragma omp declare simd
inline void store_f32(float* p, int64_t i, float x) { p[i] = x; }
#pragma omp declare simd
inline void store_f32(uint16_t* p, int64_t i, float x) { p[i] = bf16_from_f32(x); }

// f(p) with the view's typed pointer (const float* / const uint16_t*, or
// float* / uint16_t*): one kernel template serves both storages.
template <class F>
decltype(auto) visit(ReadView v, F&& f) {
  return v.bf16 ? f(v.bf16) : f(v.f32);
}
template <class F>
decltype(auto) visit(WriteView v, F&& f) {
  return v.bf16 ? f(v.bf16) : f(v.f32);
}

// out[0..n) = in[0..n), widened to fp32 or rounded to bf16 as the views are stored.
void convert(WriteView out, ReadView in, int64_t n);

// How the GEMMs of a layer compute.
struct Compute {
  MathMode math = MathMode::kF32;
};

}  // namespace mt
