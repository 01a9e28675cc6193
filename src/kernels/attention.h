// Causal multi-head self-attention core: softmax(q kᵀ / sqrt(d) + causal mask),
// dropout on the probabilities, times v. Blocked over query rows: for each
// block of kBlockQ queries, all (b, a) heads at once as one batched oneDNN
// matmul over the causal key range; only (b·a, kBlockQ, s) scores live at a
// time, never (b·a, s, s). Forward saves the row log-sum-exp; backward
// recomputes the probabilities from it (as FlashAttention does).
// Mixed precision: the batched matmuls (q·kᵀ, P·v and the three of backward)
// run in dims.math; softmax, log-sum-exp, dropout and the softmax backward
// stay fp32, as do the outputs (q, k, v may come in bf16 storage in bf16
// math: a bf16 run's saved activations). In bf16/fp16 the softmax backward
// takes D = Σ_j P_j dP_j from the score row (consistent with the rounded dP)
// instead of dctx · ctx, so ctx is then not read.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "kernels/precision.h"

namespace mt {

inline constexpr int64_t kAttentionBlockQ = 128;

// Dropout on probabilities: element (bi, j, qi, ki) has the global index
// (((sample0 + bi) * a_global + head0 + j) * s + qi) * s + ki.
struct AttentionDropout {
  RngStream rng;
  float p = 0.f;
  int64_t sample0 = 0, a_global = 0, head0 = 0;
};

struct AttentionDims {
  int64_t b = 0, a = 0, s = 0, d = 0;  // micro-batch, local heads, sequence, head dim
  MathMode math = MathMode::kF32;      // of the matmuls
};

// Floats of scratch space forward and backward need (caller plans it once);
// the same in every math mode (the matmuls' low-precision operand copies live
// in the matmul kernel's own scratch).
int64_t attention_workspace_floats(const AttentionDims& dims);

// q, k, v, ctx: (b, a, s, d) contiguous; lse: (b, a, s).   [ctx, lse: =]
// q, k, v: fp32, or in bf16 math bf16 storage, read as they are (no copy).
void attention_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                       const AttentionDims& dims, const AttentionDropout& drop, float* workspace);
// dq, dk, dv: (b, a, s, d)   [=]. ctx is read in fp32 math only (may be null
// otherwise).
void attention_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                        ReadView k, ReadView v, ReadView ctx, const float* lse,
                        const AttentionDims& dims, const AttentionDropout& drop,
                        float* workspace);

}  // namespace mt
