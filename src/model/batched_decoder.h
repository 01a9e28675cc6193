// Continuous batching over a paged key/value cache (vLLM's scheduler step,
// gemma.cpp's GenerateBatch): many sequences decode together, each step
// feeding R rows, each row a token of one sequence. A step runs the linears
// once over the (R, h) rows (one GEMM per weight: where batching pays) and
// attention row by row against that row's sequence's keys and values, which
// lie in fixed-size blocks of one pool (model/kv_block_pool.h) shared by all
// sequences. Rows of one sequence in a step take its next positions in order
// and are causal among themselves: a prompt is fed in chunks of rows (prefill),
// then one row per new token, sequences joining and leaving between steps.
//
// The layers are the training layers' blocks (model/blocks: the norm, each
// layer's attention and MLP kind's decode over R rows), same weights. With a
// TP group every rank holds its query groups' cache and its weight shards and
// steps the same rows: the row-parallel outputs are all-reduced and the
// vocab-sharded logits all-gathered, so every rank gets every row's full
// logits (PP = 1). An MoE model's EP group sums its experts' outputs.
//
// Sizing (all memory carved once): the pool holds `tokens` positions (whole
// blocks) over all live sequences; a step at most max_rows rows; a sequence at
// most max_positions positions. With a sliding window (--window-size L,0) a
// sequence keeps a ring of whole blocks covering L + 1 positions, so it runs
// past the window in that memory; a step may then feed it at most
// ring - L rows once the ring wraps.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/arena.h"
#include "model/gpt.h"
#include "model/kv_block_pool.h"

namespace mt {

struct BatchedDecoderOptions {
  int64_t tokens = 0;          // the pool's positions over all sequences (rounded up to blocks)
  int64_t block_size = 16;     // positions per block
  int64_t max_sequences = 1;   // live at once
  int64_t max_rows = 64;       // rows of one step
  int64_t max_positions = 0;   // one sequence's; 0: the pool's (at most the model's context)
};

// One row of a step: the next token of sequence `seq`.
struct DecodeToken {
  int64_t seq = 0;
  int32_t token = 0;
};

// A step's outcome: every row's logits (valid until the next step), or
// (nothing run) the blocks it lacked.
struct DecodeStep {
  const float* logits = nullptr;  // (R, v padded): row r's at logits + r·vocab_rows()
  int64_t blocks_short = 0;       // > 0: the pool lacks this many free blocks; free a sequence
  explicit operator bool() const { return logits != nullptr; }
};

class BatchedDecoder {
 public:
  // ep: an MoE model's expert-parallel group (reg holds its rank's experts), null at EP 1.
  BatchedDecoder(const ParamRegistry& reg, const float* params, const BatchedDecoderOptions& opt,
                 const TensorParallel& tp = TensorParallel{}, const Communicator* ep = nullptr);

  // Bytes a decoder of `opt` allocates on a rank of `reg` (cache pool, RoPE
  // table, a step's scratch), from the sizes alone (a closed form, not the
  // carving: tests compare the two); in double, as absurd requests overflow int64.
  static double planned_bytes(const ParamRegistry& reg, const BatchedDecoderOptions& opt);
  // Bytes of cache one token takes on a rank of `reg`: the layers' attention
  // kinds' (keys and values of the query groups, or MLA's latent and k_pe).
  static double cache_bytes_per_token(const ParamRegistry& reg);
  // What this one carved (the allocation rounds it up to pages) and its RoPE table.
  int64_t bytes() const;

  // A new sequence (empty): its id, or nothing when max_sequences are live.
  // Ids are never reused. reserve: take the blocks of that many positions now
  // (admission: nothing when the pool lacks them, and no sequence is added).
  std::optional<int64_t> add_sequence(int64_t reserve = 0);
  // Its blocks go back to the pool.
  void free_sequence(int64_t seq);
  // Feeds the rows (at most max_rows; several of one sequence take its next
  // positions in order); returns each row's logits for the token after it.
  // When the pool lacks blocks for the rows, nothing runs (see DecodeStep).
  // Throws on a bad row (an unknown sequence, a token outside the
  // vocabulary, a sequence past max_positions).
  DecodeStep step(std::span<const DecodeToken> rows);

  int64_t length(int64_t seq) const { return pool_.length(seq); }  // positions fed
  // Rows one sequence may take in a step however long it is: max_rows, or
  // with a sliding window what its ring allows once it has wrapped.
  int64_t rows_per_sequence() const {
    return sh_.window_left < 0 ? opt_.max_rows
                               : std::max<int64_t>(1, std::min(opt_.max_rows, pool_.ring() - sh_.window_left));
  }
  const KvBlockPool& pool() const { return pool_; }
  const BatchedDecoderOptions& options() const { return opt_; }  // defaults resolved
  int64_t context() const { return sh_.max_pos; }  // the model's: max_position_embeddings
  int64_t vocab_size() const { return sh_.vocab_size; }
  int64_t vocab_rows() const { return sh_.v * sh_.tp.size(); }  // padded: a row's logits

 private:
  void forward(std::span<const DecodeRow> rows);  // x_ → logits_

  BatchedDecoderOptions opt_;
  GptShapes sh_;
  GptWeights w_;
  KvBlockPool pool_;
  int64_t carved_ = 0;  // bytes of buf_ the carving uses
  HostBuffer buf_;
  std::vector<AttentionCache> caches_;  // (L) each layer's pool, of its attention kind
  float *x_, *ln_, *mean_, *rstd_, *tmp_;  // (R, h) (R, h) (R) (R) (R, h)
  // The blocks' scratch for a step, of each kind the layers take.
  AttentionKinds::DecodeWorkspaces attn_ws_;
  MlpKinds::DecodeWorkspaces mlp_ws_;
  float* logits_local_ = nullptr;  // (R, v/tp)
  float* gathered_ = nullptr;      // (tp, R, v/tp)  TP > 1
  float* logits_ = nullptr;        // (R, v)         TP > 1, else logits_local_
  // A step's rows, sized once.
  std::vector<int32_t> ids_, positions_;
  std::vector<DecodeRow> rows_;
};

}  // namespace mt
