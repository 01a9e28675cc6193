// Ring attention over the context-parallel group (Megatron core's
// AttnFuncWithCPAndKVP2P, on the CPU). Each CP rank holds its queries, keys
// and values of its two sequence chunks (context_parallel.h). Forward: the
// K/V blocks travel around the ring (rank i sends to i+1, receives from i-1)
// with non-blocking send/recv started before the block computation, so the
// transfer of the next block hides behind the current one; each (query chunk,
// key chunk) pair that the causal mask does not hide entirely is one call of
// attention_forward at global positions, and the results merge by their
// log-sum-exp (attention_merge). With a sliding window (dims.window_left) the
// pairs wholly before the queries' windows are skipped too (their K/V still
// travel: the ring is the same). Backward: the K/V blocks make the same
// trip, each rank adds its queries' contribution to the block's dK/dV, and
// the dK/dV accumulator travels one hop behind until it returns to its owner.
//
// Layout: q, k, v, ctx, dq, dk, dv are chunk-major (2, b, a, c, d) — each
// chunk a contiguous (b, a, c, d) tensor — and lse (2, b, a, c); c = s/(2·CP).
// v, ctx, dv and dctx have heads of dims.dv features (attention.h), q and k of d.
// Probability dropout is keyed by global (query, key) positions over the whole
// sequence (dims.s_global), so it equals the one-rank mask.
//
// Precision: q, k, v come as the run stores them, fp32 or (bf16 math) bf16,
// and the K/V travel in that storage (bf16: half the bytes); ctx, lse and the
// gradients are fp32, and so are the dK/dV accumulators on the ring (sums
// over CP ranks keep fp32 precision). Backward takes D = rowsum(dctx · ctx)
// from the projection input ctx_sbh (what bf16 runs keep of ctx, in bf16),
// as FlashAttention-2 and Transformer Engine do.
//
// Grouped-query attention (`groups` < a): k and v come repeated per head (as
// qkv_to_heads makes them), but only the groups' K/V travel (a/groups times
// less traffic), are repeated per head on arrival, and the dK/dV accumulators
// travel as group sums; dk and dv come back with each group's gradient on
// its first head and 0 on the others (heads_to_qkv sums a group's heads).
#pragma once
#include <cstdint>

#include "kernels/attention.h"
#include "parallel/context_parallel.h"

namespace mt {

// dims: b, a, s = this rank's s/CP rows, d, dv, math, s_global. Scratch floats
// forward and backward need (the attention kernel's plus the ring's buffers).
int64_t context_parallel_attention_workspace_floats(const AttentionDims& dims, int64_t groups);

// ctx (2, b, a, c, dv), lse (2, b, a, c)                                  [=]
void context_parallel_attention_forward(float* ctx, float* lse, ReadView q, ReadView k,
                                        ReadView v, const AttentionDims& dims, int64_t groups,
                                        const AttentionDropout& drop, const ContextParallel& cp,
                                        float* workspace);

// dq, dk (2, b, a, c, d), dv (2, b, a, c, dv) of this rank's chunks       [=]
// (dk, dv: summed over every rank's queries). lse: the forward's merged one;
// ctx_sbh (s, b, a·dv): the forward's merged ctx as the projection reads it
// (chunk j's c·b rows at row j·c·b; fp32 or bf16).
void context_parallel_attention_backward(float* dq, float* dk, float* dv, const float* dctx,
                                         ReadView q, ReadView k, ReadView v, ReadView ctx_sbh,
                                         const float* lse, const AttentionDims& dims,
                                         int64_t groups, const AttentionDropout& drop,
                                         const ContextParallel& cp, float* workspace);


// Bytes this rank sends around the ring in one forward (backward = false) or
// one backward of one layer and micro-batch: (CP-1) K|V messages, and in
// backward (CP-1) K|V plus CP dK|dV ones, each of b·g·(s/CP)·(d + dv) elements
// (K|V in the q/k/v storage: 2 bytes in bf16 math, else 4; dK|dV fp32).
int64_t context_parallel_ring_bytes(const AttentionDims& dims, int64_t groups, int64_t cp_size,
                                    bool backward);

}  // namespace mt
