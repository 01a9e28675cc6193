// Incremental decoding of one sequence with a KV cache: one token at a time,
// each layer's keys and values (one per query group, after RoPE) for past
// positions kept, so a step costs O(position), not a full forward over the
// context. The one-row case of the batched decoder (model/batched_decoder.h:
// the same blocks, TP and EP), its pool one block that holds this sequence.
//
// The cache holds `positions` tokens, what the caller needs (a prompt and its
// new tokens, the longest document scored), at most the model's context
// (max_position_embeddings): sized by the context alone, a checkpoint of 16M
// positions would take gigabytes for a one-line prompt. With a sliding window
// (--window-size L,0) the cache is a ring of L + 1 rows: position p lives in
// row p mod (L + 1), so generation runs past the window in that memory.
#pragma once
#include <cstdint>

#include "model/batched_decoder.h"

namespace mt {

class GptDecoder {
 public:
  // positions: 1..context(); 0 takes the whole context. ep: an MoE model's
  // expert-parallel group (reg holds its rank's experts), null at EP 1.
  GptDecoder(const ParamRegistry& reg, const float* params,
             const TensorParallel& tp = TensorParallel{}, int64_t positions = 0,
             const Communicator* ep = nullptr);

  // Bytes a decoder of `positions` allocates on a rank of `reg` (cache, RoPE
  // table, one token's scratch), from the sizes alone (a closed form, not the
  // carving: tests compare the two); in double, as absurd requests overflow int64.
  static double planned_bytes(const ParamRegistry& reg, int64_t positions);
  // What this one carved (the allocation rounds it up to pages) and its RoPE table.
  int64_t bytes() const { return dec_.bytes(); }

  // Feeds `token` at the next position; returns the logits (padded vocab) for
  // the token after it. Throws if the cache is full (see reset()).
  const float* step(int32_t token);
  void reset();
  int64_t position() const { return dec_.length(seq_); }
  int64_t capacity() const { return dec_.options().max_positions; }  // positions it can take
  // Rows of each layer's cache (a sliding window's ring holds fewer than capacity()).
  int64_t cache_rows() const { return dec_.pool().blocks() * dec_.pool().block_size(); }
  int64_t context() const { return dec_.context(); }  // the model's: max_position_embeddings
  int64_t vocab_size() const { return dec_.vocab_size(); }

  // The batched decoder's options for one sequence of `positions` (0: the context).
  static BatchedDecoderOptions options(const ModelConfig& c, int64_t positions);

 private:
  BatchedDecoder dec_;
  int64_t seq_ = 0;
};

}  // namespace mt
