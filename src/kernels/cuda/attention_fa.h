// FlashAttention-2 style attention in bf16 math (attention_fa.cu): mma.sync
// m16n8k16 on registers, ldmatrix operand loads, cp.async double-buffered
// tiles. Same function and rounding points as the wmma kernels of
// attention_tc.h (q, k, v, dctx rounded to bf16; the unnormalised P and dS
// rounded to bf16 before their products; fp32 accumulation), same dropout
// masks (bit for bit the CPU's). Taken when dims.math is bf16, d is 64 or 128
// and every tensor pointer is 16-byte aligned; q, k, v in bf16 (cp.async) or
// fp32 storage (converted while filling shared memory).
//
// Which implementation the CUDA entry points (attention.cu,
// attention_backward.cu) try first is a process-wide choice: env
// MT_CUDA_ATTENTION = fa (default) | tc | simt, read at the first call (any
// other value is an error), or the setter below. fa falls back to tc, then to
// the SIMT kernels, where unsupported; tc to SIMT. Plain C++: no CUDA
// includes, so g++ can include it.
#pragma once

#include "kernels/attention.h"

namespace mt::cuda {

enum class AttentionImpl { kFa, kTc, kSimt };

// The current choice.
AttentionImpl attention_impl();
// Sets the choice for this process, returning the previous one (tests, benchmarks).
AttentionImpl attention_impl(AttentionImpl impl);

// ctx, lse [=], as attention_forward; false (nothing done) when unsupported.
// Does not consult attention_impl() (the entry points do).
bool attention_fa_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                          const AttentionDims& dims, const AttentionDropout& drop);
// dq, dk, dv [=], as attention_backward in bf16 math: D from row_dsum, else
// the row's own D = Σ_j P_j m_j dP_j (a pre-pass kernel, stored into the
// workspace as attention_tc does; ctx is not read); false (nothing done)
// when unsupported.
bool attention_fa_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                           ReadView k, ReadView v, const float* lse, const AttentionDims& dims,
                           const AttentionDropout& drop, float* workspace,
                           const float* row_dsum);

}  // namespace mt::cuda
