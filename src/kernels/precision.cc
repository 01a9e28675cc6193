// Conversions between fp32 and the low-precision GEMM formats (see
// precision.h).
#include "kernels/precision.h"

#include <algorithm>
#include <functional>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/precision.h"

namespace mt {
namespace {

// Below this many elements a conversion runs on the calling thread: the
// OpenMP fork/join (a few microseconds) would cost more than the work.
constexpr int64_t kParallelMin = 1 << 15;

}  // namespace

const char* math_mode_name(MathMode m) {
  switch (m) {
    case MathMode::kF32:
      return "fp32";
    case MathMode::kBF16:
      return "bf16";
    case MathMode::kF16:
      return "fp16";
  }
  return "unknown";
}

void f32_to_bf16(uint16_t* out, const float* in, int64_t n) {
  MT_CHECK(n >= 0 && (n == 0 || (out && in)), "f32_to_bf16: n=", n, " out=", out, " in=", in,
           "; fix: pass buffers of n elements");
  if (MT_ON_DEVICE(out)) return cuda::f32_to_bf16(out, in, n);
  for_slices_on_isa(
      n,
      [=](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) out[i] = bf16_from_f32(in[i]);
      },
      kParallelMin);
}

void bf16_to_f32(float* out, const uint16_t* in, int64_t n) {
  MT_CHECK(n >= 0 && (n == 0 || (out && in)), "bf16_to_f32: n=", n, " out=", out, " in=", in,
           "; fix: pass buffers of n elements");
  if (MT_ON_DEVICE(out)) return cuda::bf16_to_f32(out, in, n);
  for_slices_on_isa(
      n,
      [=](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) out[i] = f32_from_bf16(in[i]);
      },
      kParallelMin);
}

void round_to_f16(float* out, const float* in, int64_t n) {
  MT_CHECK(n >= 0 && (n == 0 || (out && in)), "round_to_f16: n=", n, " out=", out, " in=", in,
           "; fix: pass buffers of n elements");
  if (MT_ON_DEVICE(out)) return cuda::round_to_f16(out, in, n);
  for_slices_on_isa(
      n,
      [=](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) out[i] = f16_round(in[i]);
      },
      kParallelMin);
}

bool cpu_has_native_bf16() { return cpu_has_avx512_bf16() || cpu_has_amx_bf16(); }

void convert(WriteView out, ReadView in, int64_t n) {
  if (MT_ON_DEVICE(out.raw())) return cuda::convert(out, in, n);
  if (out.f32 && in.f32)
    std::copy(in.f32, in.f32 + n, out.f32);
  else if (out.f32)
    bf16_to_f32(out.f32, in.bf16, n);
  else if (in.f32)
    f32_to_bf16(out.bf16, in.f32, n);
  else
    std::copy(in.bf16, in.bf16 + n, out.bf16);
}

}  // namespace mt
