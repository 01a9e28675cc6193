// Tensor-core attention (bf16 math): the fast path of the CUDA twins in
// attention.cu / attention_backward.cu, which call these first and fall back
// to their SIMT kernels when a call returns false (then nothing was done).
// Taken when dims.math is bf16, d is 64 or 128, and every tensor pointer is
// 16-byte aligned (q, k, v in fp32 or bf16 storage, rounded to bf16 on load:
// the CPU's bf16 operands). Plain C++: no CUDA includes, so g++ can include it.
#pragma once

#include "kernels/attention.h"

namespace mt::cuda {

// ctx, lse [=], as attention_forward; false (nothing done) when unsupported.
bool attention_tc_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                          const AttentionDims& dims, const AttentionDropout& drop);
// dq, dk, dv [=], as attention_backward (D from row_dsum, else the row's own
// D = Σ_j P_j dP̃_j, as the CPU in bf16 math; ctx is not read); false (nothing
// done) when unsupported.
bool attention_tc_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                           ReadView k, ReadView v, const float* lse, const AttentionDims& dims,
                           const AttentionDropout& drop, float* workspace,
                           const float* row_dsum);

// Switches the tensor-core path on or off for this process (on by default),
// returning the previous setting: for tests and benchmarks of the SIMT path.
bool set_attention_tensor_cores(bool on);

}  // namespace mt::cuda
