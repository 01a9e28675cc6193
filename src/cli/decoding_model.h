// A checkpoint loaded for decoding (`megatron generate` and `megatron score`):
// its model configuration at a TP size, its own tokenizer, this rank's weight
// shards and a KV-cache decoder over them. Every rank of the TP group loads
// its shards; the decoder all-gathers the logits, so each rank has them all.
#pragma once
#include <memory>
#include <string>

#include "core/arena.h"
#include "data/tokenizer.h"
#include "dist/parallel_state.h"
#include "model/gpt_decoder.h"
#include "model/params.h"
#include "train/checkpoint_io.h"

namespace mt {

struct DecodingModel {
  ModelConfig cfg;                   // vocab_size: the real vocabulary
  std::unique_ptr<Tokenizer> tok;    // the checkpoint's
  std::unique_ptr<ParamRegistry> reg;
  HostBuffer params;
  RunState state;                    // iteration loaded
  std::unique_ptr<GptDecoder> dec;
};

// Loads `load` (a --save directory) for `who` ("generate", "score"), checking
// that ps's TP size divides the model and that the tokenizer is a text one.
DecodingModel load_for_decoding(const std::string& load, const ParallelState& ps,
                                const char* who);

// Natural-log probability of `token` under softmax(logits) over the real
// vocabulary (no padding rows), at temperature 1, in double.
double log_prob(const float* logits, int64_t vocab_size, int32_t token);

}  // namespace mt
