// CUDA twin of kernels/layout.h (same signatures; GPU pointers).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// qkv (s, b, g, a/g + 2, d) → q, k, v (b, a, s, d), k and v repeated per group  [=]
void qkv_to_heads(float* q, float* k, float* v, const float* qkv, int64_t s, int64_t b, int64_t a,
                  int64_t g, int64_t d);
// dq, dk, dv (b, a, s, d) → dqkv (s, b, g, a/g + 2, d), group sums in head order [=]
void heads_to_qkv(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t s,
                  int64_t b, int64_t a, int64_t g, int64_t d);
// x (b, a, s, d) → out (s, b, a·d), fp32 or (rounded) bf16 storage              [=]
void heads_to_sbh(WriteView out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d);
// x (s, b, a·d) → out (b, a, s, d)                                               [=]
void sbh_to_heads(float* out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d);

}  // namespace mt::cuda
