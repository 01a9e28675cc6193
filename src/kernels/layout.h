// Layout changes between the sequence-first activations (s, b, ...) and the
// per-head layout (b, a, s, d) the attention core works in.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// Megatron core's fused QKV layout with g query groups of a/g heads each:
// qkv (s, b, g, a/g + 2, d) — per group its heads' q, then its k and v (g = a
// is GPT-2's per-head [q, k, v] interleave). Out: q (b, a, s, d), and k, v
// (b, a, s, d) with each group's k and v repeated for its heads.           [=]
void qkv_to_heads(float* q, float* k, float* v, const float* qkv, int64_t s, int64_t b,
                  int64_t a, int64_t g, int64_t d);
// dq, dk, dv (b, a, s, d) → dqkv (s, b, g, a/g + 2, d); the k and v gradients
// of a group's heads are summed (in head order).                            [=]
void heads_to_qkv(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t s,
                  int64_t b, int64_t a, int64_t g, int64_t d);
// x (b, a, s, d) → out (s, b, a·d), fp32 or (rounded) bf16 storage              [=]
void heads_to_sbh(WriteView out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d);
// x (s, b, a·d) → out (b, a, s, d)                                               [=]
void sbh_to_heads(float* out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d);

}  // namespace mt
