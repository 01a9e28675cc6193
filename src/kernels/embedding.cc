// Embedding lookup and its deterministic backward for a table shard holding
// rows [row_start, row_start + rows) of the full vocabulary.
//
// Backward is a scatter-add; instead of atomics, threads split the hidden
// columns into blocks and each walks all n ids in order, so the sum for each
// table entry is taken in the same order for any thread count.
#include "kernels/embedding.h"

#include <algorithm>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/embedding.h"

namespace mt {

namespace {

constexpr int64_t kColBlock = 64;  // columns per thread work item in backward

void check_ids(const char* who, const int32_t* ids, int64_t n, int64_t h, int64_t row_start,
               int64_t rows) {
  MT_CHECK(n >= 0 && h > 0 && row_start >= 0 && rows >= 0, who, ": bad shape n=", n, " h=", h,
           " row_start=", row_start, " rows=", rows);
  for (int64_t i = 0; i < n; ++i)
    MT_CHECK(ids[i] >= 0, who, ": token id ", ids[i], " at position ", i,
             " is negative; fix: check the tokenizer / dataset produced valid ids");
}

}  // namespace

namespace {
template <class T>
void forward_impl(float* out, const int32_t* ids, const T* table, int64_t n, int64_t h,
                  int64_t row_start, int64_t rows, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* y = out + i * h;
    const int64_t r = int64_t(ids[i]) - row_start;
    if (r < 0 || r >= rows) {  // another shard's row: contributes zero
      if (!accumulate) std::fill(y, y + h, 0.f);
      continue;
    }
    const T* src = table + r * h;
    if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < h; ++j) y[j] += load_f32(src, j);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < h; ++j) y[j] = load_f32(src, j);
    }
  }
}
}  // namespace

// out (n, h) = table[ids - row_start]   (or += when accumulate)
void embedding_forward(float* out, const int32_t* ids, ReadView table, int64_t n, int64_t h,
                       int64_t row_start, int64_t rows, bool accumulate) {
  if (MT_ON_DEVICE(out))
    return cuda::embedding_forward(out, ids, table, n, h, row_start, rows, accumulate);
  check_ids("embedding_forward", ids, n, h, row_start, rows);
  MT_CHECK(bool(table), "embedding_forward: no table");
  if (table.bf16)
    forward_impl(out, ids, table.bf16, n, h, row_start, rows, accumulate);
  else
    forward_impl(out, ids, table.f32, n, h, row_start, rows, accumulate);
}

// dtable (rows, h) += scatter of dout by ids (deterministic: no atomics)
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t n,
                        int64_t h, int64_t row_start, int64_t rows) {
  if (MT_ON_DEVICE(dtable))
    return cuda::embedding_backward(dtable, dout, ids, n, h, row_start, rows);
  check_ids("embedding_backward", ids, n, h, row_start, rows);
  const int64_t nblocks = (h + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const int64_t c0 = blk * kColBlock, w = std::min(kColBlock, h - c0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = int64_t(ids[i]) - row_start;
      if (r < 0 || r >= rows) continue;
      float* dst = dtable + r * h + c0;
      const float* src = dout + i * h + c0;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) dst[j] += src[j];
    }
  }
}

}  // namespace mt
