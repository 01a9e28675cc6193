#include "kernels/bf16_in_place.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/precision.h"

namespace mt {
namespace {

// Elements per local block: 256 bytes of fp32, moved with memcpy.
constexpr int64_t kBlock = 64;
// Ranges below this many elements (and the first/last round) run on one
// thread: an OpenMP round costs a barrier (~microseconds), more than the
// work of a few thousand elements.
constexpr int64_t kSerialElems = int64_t(1) << 15;

// Elements [b, e), fp32 at byte 4i → bf16 at byte 2i, ascending blocks. Each
// block is read whole before it is written, and its writes (below 2(i+k))
// stay below the next block's reads (from 4(i+k)).
void round_range(char* base, int64_t b, int64_t e) {
  float f[kBlock];
  uint16_t h[kBlock];
  for (int64_t i = b; i < e; i += kBlock) {
    const int64_t k = std::min(kBlock, e - i);
    std::memcpy(f, base + 4 * i, size_t(k) * 4);
#pragma omp simd
    for (int64_t j = 0; j < k; ++j) h[j] = bf16_from_f32(f[j]);
    std::memcpy(base + 2 * i, h, size_t(k) * 2);
  }
}

// Elements [b, e), bf16 at byte 2i → fp32 · scale at byte 4i, descending
// blocks. A block's writes (from 4i) reach only bf16 elements >= 2i, which
// are in this block or above: already read.
void widen_range(char* base, int64_t b, int64_t e, float scale) {
  float f[kBlock];
  uint16_t h[kBlock];
  for (int64_t hi = e; hi > b;) {
    const int64_t i = std::max(b, hi - kBlock), k = hi - i;
    std::memcpy(h, base + 2 * i, size_t(k) * 2);
#pragma omp simd
    for (int64_t j = 0; j < k; ++j) f[j] = f32_from_bf16(h[j]) * scale;
    std::memcpy(base + 4 * i, f, size_t(k) * 4);
    hi = i;
  }
}

// This thread's share of [b, e), cut at block boundaries (inside a parallel region).
void thread_share(int64_t b, int64_t e, int64_t* tb, int64_t* te) {
  const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
  const int64_t blocks = (e - b + kBlock - 1) / kBlock;
  *tb = std::min(e, b + blocks * t / nt * kBlock);
  *te = std::min(e, b + blocks * (t + 1) / nt * kBlock);
}

}  // namespace

uint16_t* round_to_bf16_in_place(float* x, int64_t n) {
  MT_CHECK(n >= 0 && (n == 0 || x != nullptr), "round_to_bf16_in_place: n=", n, " x=", x,
           "; fix: pass a buffer of n floats");
  char* base = reinterpret_cast<char*>(x);
  const int64_t first = std::min(n, kSerialElems);
  round_range(base, 0, first);
  if (first < n) {
#pragma omp parallel if (omp_get_max_threads() > 1)
    // Round r converts [s, 2s): reads [4s, 8s), writes [2s, 4s); every read
    // of an earlier round is done (the barrier at the end of each round).
    for (int64_t s = first; s < n; s = std::min(n, 2 * s)) {
      int64_t tb, te;
      thread_share(s, std::min(n, 2 * s), &tb, &te);
      round_range(base, tb, te);
#pragma omp barrier
    }
  }
  return reinterpret_cast<uint16_t*>(x);
}

void widen_bf16_in_place(float* x, int64_t begin, int64_t end, float scale) {
  MT_CHECK(begin >= 0 && begin <= end && (end == begin || x != nullptr),
           "widen_bf16_in_place: elements [", begin, ", ", end, ") of x=", x,
           "; fix: pass 0 <= begin <= end and the bucket's buffer");
  char* base = reinterpret_cast<char*>(x);
  if (end - begin > kSerialElems) {
#pragma omp parallel if (omp_get_max_threads() > 1)
    // Each round converts [m, hi) with m >= hi/2: reads [2m, 2hi), writes
    // [4m, 4hi), above every bf16 element still to read (below 2m).
    for (int64_t hi = end; hi - begin > kSerialElems;) {
      const int64_t m = std::max(begin, (hi + 1) / 2);
      int64_t tb, te;
      thread_share(m, hi, &tb, &te);
      widen_range(base, tb, te, scale);
#pragma omp barrier
      hi = m;
    }
  }
  int64_t e = end;  // where the rounds stopped
  while (e - begin > kSerialElems) e = std::max(begin, (e + 1) / 2);
  widen_range(base, begin, e, scale);
}

}  // namespace mt
