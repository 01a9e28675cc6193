// Incremental decoding with a KV cache: one token at a time, each layer's keys
// and values (one per query group, after RoPE) for past positions kept, so a step costs O(position), not a full
// forward over the context. Same kernels and weights as training; with a TP
// group every rank holds its heads' cache and its weight shards, the
// row-parallel outputs are all-reduced and the vocab-sharded logits
// all-gathered, so every rank gets the full logits (PP = 1).
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "model/gpt.h"

namespace mt {

class GptDecoder {
 public:
  GptDecoder(const ParamRegistry& reg, const float* params,
             const TensorParallel& tp = TensorParallel{});

  // Feeds `token` at the next position; returns the logits (padded vocab) for
  // the token after it. Throws if the context is full (see reset()).
  const float* step(int32_t token);
  void reset() { pos_ = 0; }
  int64_t position() const { return pos_; }
  int64_t capacity() const { return sh_.max_pos; }
  int64_t vocab_size() const { return sh_.vocab_size; }

 private:
  GptShapes sh_;
  GptWeights w_;
  HostBuffer buf_;
  float* k_cache_ = nullptr;  // (L, max_pos, g·d)  this rank's query groups
  float* v_cache_ = nullptr;  // (L, max_pos, g·d)
  float *x_, *ln_, *mean_, *rstd_, *qkv_, *q_, *ctx_, *tmp_, *fc_, *act_, *scores_;
  float* logits_local_ = nullptr;  // (v/tp)
  float* logits_ = nullptr;        // (v)
  int64_t pos_ = 0;
};

}  // namespace mt
