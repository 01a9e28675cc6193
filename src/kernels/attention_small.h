// Causal self-attention for small heads and short sequences (config (a):
// 48 heads of s = 64, d = 32 a layer), a head per thread, every product of
// the head in the thread's own cache: register-tiled micro-kernels on the
// AVX-512 and AVX2 paths (kernels/cpu_isa.h), a scalar path for the tests.
// The batched oneDNN path of attention.cc computes every score of the
// (s, s) square, masked half included, and moves the (b·a, s, s) scores
// through memory between its products and row passes; this one stops each
// row tile at the diagonal and keeps a head's scores in the thread's scratch.
// Same math as attention.cc (fp32, the row max shift, exp_f32, the saved
// log-sum-exp, D = dctx · ctx): results agree to round-off.
#pragma once
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cpu_isa.h"

namespace mt {

// Whether the small path takes this call: fp32 math, no dropout, the whole
// causal square of one sequence (sk = s, both from position 0), no window,
// no documents, values of q's head size (dv 0 or d), d <= 128, s <= 512, a
// vector path active (AVX2 or AVX-512), and `workspace_floats` (the
// caller's attention workspace) holding every OpenMP thread's scratch.
bool attention_small_applies(const AttentionDims& dims, const AttentionDropout& drop,
                             int64_t workspace_floats);

// As attention_forward / attention_backward (attention.h), for calls that
// attention_small_applies() accepts, on path `isa`. q, k, v, ctx, dctx, dq,
// dk, dv: (b, a, s, d); lse, row_dsum: (b, a, s).        [ctx, lse, dq, dk, dv: =]
void attention_small_forward(float* ctx, float* lse, const float* q, const float* k, const float* v,
                             const AttentionDims& dims, float* workspace, Isa isa);
// row_dsum null: D = rowsum(dctx * ctx) per query row.
void attention_small_backward(float* dq, float* dk, float* dv, const float* dctx, const float* q,
                              const float* k, const float* v, const float* ctx, const float* lse,
                              const float* row_dsum, const AttentionDims& dims, float* workspace,
                              Isa isa);

// Floats of scratch one thread needs for `dims` (forward and backward).
int64_t attention_small_thread_floats(const AttentionDims& dims);

}  // namespace mt
