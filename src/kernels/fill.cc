#include "kernels/fill.h"

#include <omp.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>

#include "backend/device.h"

namespace mt {

void zero_streaming(float* x, int64_t n) {
  if (MT_ON_DEVICE(x)) return fill_zero(x, size_t(n) * sizeof(float));
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    float* p = x + n * t / nt;
    float* const end = x + n * (t + 1) / nt;
#if defined(__AVX512F__)
    for (; p < end && reinterpret_cast<uintptr_t>(p) % 64 != 0; ++p) *p = 0.f;
    for (; p + 16 <= end; p += 16) _mm512_stream_ps(p, _mm512_setzero_ps());
    _mm_sfence();
#endif
    std::fill(p, end, 0.f);
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
