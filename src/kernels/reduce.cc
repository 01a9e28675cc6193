// Flat-buffer reductions for gradient clipping and NaN/Inf checks.
// sum_squares is deterministic for a given thread count: each thread sums a
// fixed static slice in double and the per-thread partials are added in
// thread order (not via OpenMP's reduction, whose combine order is unspecified).
#include "kernels/reduce.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/reduce.h"

namespace mt {

namespace {

constexpr int kMaxThreads = 256;

}  // namespace

double sum_squares(const float* x, int64_t n) {
  const FloatRange r{x, n};
  return sum_squares(&r, 1);
}

double sum_squares(const FloatRange* ranges, size_t count) {
  if (count == 0) return 0.0;
  if (MT_ON_DEVICE(ranges[0].x)) {
    double total = 0.0;
    for (size_t i = 0; i < count; ++i) total += cuda::sum_squares(ranges[i].x, ranges[i].n);
    return total;
  }
  const int nt = std::max(1, std::min(omp_get_max_threads(), kMaxThreads));
  std::vector<double> partial(count * size_t(nt), 0.0);  // [range][thread]
  int used = 1;
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num(), threads = omp_get_num_threads();
    for (size_t r = 0; r < count; ++r) {
      const float* x = ranges[r].x;
      const int64_t n = ranges[r].n, lo = n * tid / threads, hi = n * (tid + 1) / threads;
      double acc = 0.0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = lo; i < hi; ++i) acc += double(x[i]) * double(x[i]);
      partial[r * size_t(nt) + size_t(tid)] = acc;
    }
    if (tid == 0) used = threads;
  }
  double total = 0.0;
  for (size_t r = 0; r < count; ++r) {
    double range_total = 0.0;  // the range's partials in thread order
    for (int t = 0; t < used; ++t) range_total += partial[r * size_t(nt) + size_t(t)];
    total += range_total;
  }
  return total;
}

// x (n) *= alpha
void scale_inplace(float* x, int64_t n, float alpha) {
  if (MT_ON_DEVICE(x)) return cuda::scale_inplace(x, n, alpha);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void add_scaled_inplace(float* y, const float* x, int64_t n, float alpha) {
  MT_CHECK(!MT_ON_DEVICE(y) && !MT_ON_DEVICE(x),
           "add_scaled_inplace has no GPU version yet (sharded gradients run on the CPU only)");
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// True iff no element is NaN or +-Inf (exponent bits all ones), tested on the
// bit pattern so it holds even under -ffast-math.
bool all_finite(const float* x, int64_t n) {
  if (MT_ON_DEVICE(x)) return cuda::all_finite(x, n);
  int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    bad |= int((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

bool unscale_and_check(float* grads, int64_t n, float inv_scale) {
  if (MT_ON_DEVICE(grads)) {  // two passes on the GPU: the same answer and values
    const bool bad = !all_finite(grads, n);
    scale_inplace(grads, n, inv_scale);
    return bad;
  }
  // Non-finite = all exponent bits set (inf or NaN); a bit test stays correct
  // even if the build ever enables -ffast-math.
  int64_t bad = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : bad)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &grads[i], sizeof bits);
    bad += (bits & 0x7f800000u) == 0x7f800000u;
    grads[i] *= inv_scale;
  }
  return bad > 0;
}

int64_t count_nonfinite(const float* x, int64_t n, int64_t* first) {
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(x[i]);
  *first = -1;
  for (int64_t i = 0; i < n && bad > 0 && *first < 0; ++i)
    if (!std::isfinite(x[i])) *first = i;
  return bad;
}

}  // namespace mt
