// CUDA twin of kernels/embedding.h (same signatures; GPU pointers for out,
// table and dtable; ids on the GPU, or on the host: then checked there and
// copied to the GPU).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// out (n, h) = table[ids - row_start]   (or += when accumulate)
void embedding_forward(float* out, const int32_t* ids, ReadView table, int64_t n, int64_t h,
                       int64_t row_start, int64_t rows, bool accumulate);
// dtable (rows, h) += scatter of dout by ids (deterministic: no atomics)
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t n,
                        int64_t h, int64_t row_start, int64_t rows);

}  // namespace mt::cuda
