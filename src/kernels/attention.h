// Causal multi-head self-attention core: softmax(q kᵀ / sqrt(d) + causal mask),
// dropout on the probabilities, times v. One call is one block of a longer
// sequence in general: s queries at global positions [q_pos0, q_pos0 + s) over
// sk keys at [k_pos0, k_pos0 + sk), key visible when its position <= the
// query's (the whole causal self-attention is q_pos0 = k_pos0 = 0, sk = s).
// A sliding window (Megatron's --window-size L,0, flash-attention's
// window_size) also hides keys more than L positions before the query: query
// Q sees keys Q - L <= K <= Q; a key block wholly outside every query's window
// costs no matmul. Documents inside a sequence (Megatron's
// --reset-attention-mask) hide more: with doc_start, query Q of sample bi sees
// only keys K >= doc_start[bi][Q], the first position of its document.
// The blocks of one query row (context parallelism's ring) merge with
// attention_merge by their log-sum-exp; backward then takes the merged lse and
// D = rowsum(dctx * ctx) of the merged result. A row that sees no key of the
// block gets ctx 0 and lse -inf. Blocked over query rows: for each
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
// Head sizes: q and k have d features, v and ctx dv (multi-latent attention:
// dqk + dpe against v_head_dim), so P·v and its gradients run on dv columns;
// the softmax scale is 1 / sqrt(d).
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "kernels/precision.h"

namespace mt {

inline constexpr int64_t kAttentionBlockQ = 128;

// Dropout on probabilities: element (bi, j, qi, ki) at global positions
// (Q, K) = (q_pos0 + qi, k_pos0 + ki) has the global index
// (((sample0 + bi) * a_global + head0 + j) * S + Q) * S + K, S = s_global.
struct AttentionDropout {
  RngStream rng;
  float p = 0.f;
  int64_t sample0 = 0, a_global = 0, head0 = 0;
};

struct AttentionDims {
  int64_t b = 0, a = 0, s = 0, d = 0;  // micro-batch, local heads, queries, q/k head dim
  MathMode math = MathMode::kF32;      // of the matmuls
  int64_t sk = 0;                      // keys (0: s)
  int64_t q_pos0 = 0, k_pos0 = 0;      // global positions of the first query and key
  int64_t s_global = 0;                // whole sequence, of the dropout index (0: s)
  int64_t window_left = -1;            // sliding window L: keys >= query - L (-1: unbounded)
  // (b, s_global) host array, or null: the first key position each query may
  // see (its document's start; non-decreasing along a sample, <= the query).
  const int32_t* doc_start = nullptr;
  int64_t dv = 0;  // v and ctx head dim (0: d); last, so positional initialisers keep working
};

// Floats of scratch space forward and backward need (caller plans it once);
// the same in every math mode (the matmuls' low-precision operand copies live
// in the matmul kernel's own scratch).
int64_t attention_workspace_floats(const AttentionDims& dims);

// Of dims: v's and ctx's head dim, dv (d when dv is 0).
inline int64_t attention_dv(const AttentionDims& dims) { return dims.dv > 0 ? dims.dv : dims.d; }

// q: (b, a, s, d), k: (b, a, sk, d), v: (b, a, sk, dv), ctx: (b, a, s, dv)
// contiguous; lse: (b, a, s).                                   [ctx, lse: =]
// q, k, v: fp32, or in bf16 math bf16 storage, read as they are (no copy).
void attention_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                       const AttentionDims& dims, const AttentionDropout& drop, float* workspace);
// dq: (b, a, s, d), dk: (b, a, sk, d), dv: (b, a, sk, dv)   [=]; dctx, ctx
// as ctx: (b, a, s, dv). lse: (b, a, s) of the whole
// row (merged over blocks). row_dsum: (b, a, s) D = rowsum(dctx * ctx) of the
// merged ctx, or null: then computed from ctx in fp32 math, and in bf16/fp16
// from the row's own dP (ctx may then be null; row_dsum is required when the
// row's keys span several calls).
void attention_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                        ReadView k, ReadView v, ReadView ctx, const float* lse,
                        const AttentionDims& dims, const AttentionDropout& drop,
                        float* workspace, const float* row_dsum = nullptr);

// Merges one block's result into the running one by the online-softmax rule
// (rows: b·a·s query rows, ctx rows of d: the core's dv):  [ctx, lse: updated]
//   lse' = log(e^lse + e^lse_block),
//   ctx' = ctx · e^(lse - lse') + ctx_block · e^(lse_block - lse').
// A row's -inf (no visible key yet) takes the other side as it is.
void attention_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                     int64_t rows, int64_t d);

// D = rowsum(dctx * ctx) per query row (rows of d: the core's dv).   [dsum: =]
void attention_row_dsum(float* dsum, const float* dctx, const float* ctx, int64_t rows,
                        int64_t d);

}  // namespace mt
