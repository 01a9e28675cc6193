// Attention of one new token over a paged key/value cache (KV-cache decoding):
// the query attends to positions [first, last] of its sequence, whose keys and
// values lie in fixed-size blocks of a pool (vLLM's paged attention; a
// contiguous cache is one block). Position t sits in slot t mod ring of the
// sequence, slot s in row s mod block_size of block table[s / block_size]
// (a ring: a sliding window's cache reuses its slots). Grouped-query
// attention: head j reads its group j / (a/g). Forward only (decoding
// computes no gradients); host memory.
#pragma once
#include <cstdint>

namespace mt {

// One sequence's keys and values in the pool.
struct PagedKv {
  const float* k = nullptr;        // (blocks, block_size, g·d) keys after RoPE
  const float* v = nullptr;        // (blocks, block_size, g·d)
  int64_t block_size = 0;          // rows of a block
  const int32_t* table = nullptr;  // the sequence's blocks, slot order
  int64_t ring = 0;                // the sequence's slots (a multiple of block_size)
  int64_t g = 0, d = 0;            // key/value heads, head size
};

// ctx (a, d) [=] = softmax(q · k^T / sqrt(d)) · v per head over positions
// [first, last], where q: (a, d) this token's queries (after RoPE);
// scores: (last - first + 1) scratch. last - first < ring.
void attention_decode_forward(float* ctx, float* scores, const float* q, int64_t a,
                              const PagedKv& kv, int64_t first, int64_t last);

}  // namespace mt
