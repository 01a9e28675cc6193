// CUDA twins of src/kernels/attention.h (same signatures and semantics; see
// that header). Plain C++: no CUDA includes, so g++ can include it.
#pragma once
#include <cstdint>

#include "kernels/attention.h"

namespace mt::cuda {

// ctx, lse [=]; q, k, v fp32 or (bf16 math) bf16 storage; workspace unused.
void attention_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                       const AttentionDims& dims, const AttentionDropout& drop, float* workspace);
// dq, dk, dv [=]; the workspace holds the row sums D (b, a, s) when it is large
// enough (it always is for sk >= s / 256), else a grow-only scratch does.
void attention_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                        ReadView k, ReadView v, ReadView ctx, const float* lse,
                        const AttentionDims& dims, const AttentionDropout& drop,
                        float* workspace, const float* row_dsum = nullptr);
// [ctx, lse: updated]
void attention_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                     int64_t rows, int64_t d);
// [dsum: =]
void attention_row_dsum(float* dsum, const float* dctx, const float* ctx, int64_t rows,
                        int64_t d);

}  // namespace mt::cuda
