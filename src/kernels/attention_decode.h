// Attention of one new token over a key/value cache (KV-cache decoding): the
// query attends to cache rows [0, pos], causal by construction (row order does
// not matter: a sliding window's ring cache passes its filled rows). Grouped-query attention: head j reads its group j / (a/g).
// Forward only (decoding computes no gradients); host memory.
#pragma once
#include <cstdint>

namespace mt {

// ctx (a, d) [=] = softmax(q · k^T / sqrt(d)) · v per head, where
// q: (a, d) this token's queries (after RoPE),
// k_cache, v_cache: (capacity, g·d) rows of past positions, keys after RoPE,
// scores: (pos + 1) scratch.
void attention_decode_forward(float* ctx, const float* q, const float* k_cache,
                              const float* v_cache, int64_t a, int64_t g, int64_t d, int64_t pos,
                              float* scores);

}  // namespace mt
