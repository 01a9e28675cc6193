// Incremental decoding with a KV cache: one token at a time, each layer's keys
// and values (one per query group, after RoPE) for past positions kept, so a
// step costs O(position), not a full forward over the context. The layers are
// the training layers' blocks (model/blocks: the norm, each layer's attention
// and MLP kind's decode, the query at an offset into the attention kind's
// cache), same weights; with a TP
// group every rank holds its heads' cache and its weight shards, the
// row-parallel outputs are all-reduced and the vocab-sharded logits
// all-gathered, so every rank gets the full logits (PP = 1).
//
// The cache holds `positions` tokens, what the caller needs (a prompt and its
// new tokens, the longest document scored), at most the model's context
// (max_position_embeddings): sized by the context alone, a checkpoint of 16M
// positions would take gigabytes for a one-line prompt. With a sliding window
// (--window-size L,0) each layer's cache is a ring of L + 1 rows: position p
// lives in row p mod (L + 1), so generation runs past the window in that memory.
#pragma once
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "model/gpt.h"

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
  int64_t bytes() const;

  // Feeds `token` at the next position; returns the logits (padded vocab) for
  // the token after it. Throws if the cache is full (see reset()).
  const float* step(int32_t token);
  void reset() { pos_ = 0; }
  int64_t position() const { return pos_; }
  int64_t capacity() const { return capacity_; }  // positions the decoder can take
  // Rows of the first layer's cache (its attention kind's: a sliding window's ring
  // holds fewer than capacity()).
  int64_t cache_rows() const;
  int64_t context() const { return sh_.max_pos; }  // the model's: max_position_embeddings
  int64_t vocab_size() const { return sh_.vocab_size; }

 private:
  GptShapes sh_;
  GptWeights w_;
  int64_t capacity_ = 0;
  int64_t carved_ = 0;  // bytes of buf_ the carving uses
  HostBuffer buf_;
  std::vector<AttentionCache> caches_;  // (L) each layer's, of its attention kind
  float *x_, *ln_, *mean_, *rstd_, *tmp_;  // (h) (h) (1) (1) (h): one token
  // The blocks' one-token scratch, of each kind the layers take.
  AttentionKinds::DecodeWorkspaces attn_ws_;
  MlpKinds::DecodeWorkspaces mlp_ws_;
  float* logits_local_ = nullptr;  // (v/tp)
  float* logits_ = nullptr;        // (v)
  int64_t pos_ = 0;
};

}  // namespace mt
