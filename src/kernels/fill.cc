#include "kernels/fill.h"

#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>

#include "backend/device.h"
#include "kernels/cpu_isa.h"

namespace mt {
namespace {

#if defined(__x86_64__)
// Zeroes [p, end) up to the first address aligned to `bytes` (a register);
// returns it, or end.
float* zero_to_alignment(float* p, float* end, uintptr_t bytes) {
  for (; p < end && reinterpret_cast<uintptr_t>(p) % bytes != 0; ++p) *p = 0.f;
  return p;
}

// Zeroes [p, end) with streaming stores of whole registers from the first
// aligned address on; returns where it stopped (less than a register before
// end). (Intrinsics need the path's own function: a shared template or a
// lambda would not inherit its target.)
MT_TARGET_AVX2 float* stream_zeros_avx2(float* p, float* end) {
  for (p = zero_to_alignment(p, end, 32); p + 8 <= end; p += 8)
    _mm256_stream_ps(p, _mm256_setzero_ps());
  _mm_sfence();
  return p;
}

MT_TARGET_AVX512 float* stream_zeros_avx512(float* p, float* end) {
  for (p = zero_to_alignment(p, end, 64); p + 16 <= end; p += 16)
    _mm512_stream_ps(p, _mm512_setzero_ps());
  _mm_sfence();
  return p;
}
#endif

}  // namespace

void zero_streaming(float* x, int64_t n) {
  if (MT_ON_DEVICE(x)) return fill_zero(x, size_t(n) * sizeof(float));
  const Isa isa = active_isa();
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    float* p = x + n * t / nt;
    float* const end = x + n * (t + 1) / nt;
#if defined(__x86_64__)
    if (isa == Isa::kAvx512) p = stream_zeros_avx512(p, end);
    if (isa == Isa::kAvx2) p = stream_zeros_avx2(p, end);
#endif
    std::fill(p, end, 0.f);  // the scalar path, and the tail
  }
}

void fill_normal(float* dst, int64_t rows, int64_t cols, float std, const RngStream& rng,
                 const std::function<uint64_t(int64_t)>& row_first_index) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t first = row_first_index(r);
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = std * rng.normal(first + uint64_t(c));
  }
}

}  // namespace mt
