// Embedding lookup for a (possibly vocab-sharded) table holding rows
// [row_start, row_start + rows) of the full table. Ids outside that range give
// zero rows (Megatron's VocabParallelEmbedding masking); the caller all-reduces.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// out (n, h) = table[ids - row_start]   (or += when accumulate); the table
// in fp32 or bf16 storage
void embedding_forward(float* out, const int32_t* ids, ReadView table, int64_t n, int64_t h,
                       int64_t row_start, int64_t rows, bool accumulate);
// dtable (rows, h) += scatter of dout by ids (deterministic: no atomics)
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t n,
                        int64_t h, int64_t row_start, int64_t rows);

}  // namespace mt
