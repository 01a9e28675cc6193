// Context parallelism (Megatron's --context-parallel-size): the sequence of
// every sample is cut into 2·CP equal chunks and CP rank i holds chunks i and
// 2·CP-1-i (Megatron's get_batch_on_this_cp_rank), so that under the causal
// mask every rank has the same attention work. A rank's s/CP rows are its two
// chunks one after the other; at CP = 1 there is one chunk, the whole sequence.
#pragma once
#include <cstdint>

#include "comm/communicator.h"

namespace mt {

struct ContextParallel {
  const Communicator* cp = nullptr;  // size 1 → the whole sequence on this rank
  int64_t size() const { return cp ? cp->size() : 1; }
  int64_t rank() const { return cp ? cp->rank() : 0; }
  int64_t chunks() const { return size() > 1 ? 2 : 1; }  // local chunks
};

// Global position of the first token of local chunk j (0 or 1) of CP rank
// `rank`, chunks of `chunk_len` tokens.
inline int64_t cp_chunk_pos0(int64_t cp_size, int64_t rank, int64_t chunk_len, int64_t j) {
  return (j == 0 ? rank : 2 * cp_size - 1 - rank) * chunk_len;
}

// Global position of local row r of CP rank `rank` (s_local_cp = s / CP rows).
inline int64_t cp_global_position(int64_t cp_size, int64_t rank, int64_t s_local_cp, int64_t r) {
  if (cp_size == 1) return r;
  const int64_t c = s_local_cp / 2;
  return cp_chunk_pos0(cp_size, rank, c, r / c) + r % c;
}

// This rank's chunks of one row of `s` tokens: dst (s/CP) = [chunk i, chunk
// 2·CP-1-i] of src (s). The data loader hands each rank its chunks this way.
template <class T>
void cp_select_chunks(T* dst, const T* src, int64_t s, int64_t cp_size, int64_t rank) {
  const int64_t c = s / (2 * cp_size);
  for (int64_t j = 0; j < 2; ++j) {
    const T* from = src + cp_chunk_pos0(cp_size, rank, c, j);
    for (int64_t t = 0; t < c; ++t) dst[j * c + t] = from[t];
  }
}

}  // namespace mt
