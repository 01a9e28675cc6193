// A checkpoint loaded for decoding (`megatron generate` and `megatron score`):
// its model configuration at a TP size, its own tokenizer, this rank's weight
// shards and a KV-cache decoder over them. Every rank of the TP group loads
// its shards; the decoder all-gathers the logits, so each rank has them all.
// An MoE model may also split its experts over EP ranks (ETP 1): the world is
// then lcm(TP, EP) ranks, TP groups that decode the same text side by side, the
// EP group summing its experts' outputs (model/blocks/moe_block.h).
//
// Two steps, because the request sizes the cache: open_for_decoding reads the
// configuration and tokenizer (the caller tokenizes its text and counts the
// positions it needs), load_decoder checks weights + cache against the host's
// memory and only then allocates and loads.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "core/arena.h"
#include "data/tokenizer.h"
#include "comm/parallel_state.h"
#include "model/gpt_decoder.h"
#include "model/params.h"
#include "checkpoint/checkpoint_io.h"

namespace mt {

// --tensor-model-parallel-size and --expert-model-parallel-size of a decoding
// command, added to `app` for `who` ("generate", "score").
struct DecodingLayout {
  int tp = 1, ep = 1;
};
void add_decoding_layout_options(CLI::App& app, DecodingLayout& l, const char* help_tp);
// Checks the sizes against the world size (one line naming the mpirun fix)
// and returns the parallel configuration to build the ParallelState from.
ParallelConfig decoding_parallel_config(const DecodingLayout& l, int world, const char* who);

struct DecodingModel {
  std::string load;                  // the checkpoint directory
  const char* who = "";              // "generate", "score": prefixes its messages
  ModelConfig cfg;                   // vocab_size: the real vocabulary
  std::unique_ptr<Tokenizer> tok;    // the checkpoint's
  std::unique_ptr<ParamRegistry> reg;
  HostBuffer params;                 // empty until load_decoder
  RunState state;                    // iteration loaded
  std::unique_ptr<GptDecoder> dec;   // null until load_decoder
  int64_t context() const { return cfg.max_position_embeddings; }
};

// Reads `load` (a --save directory) for `who`: its configuration, checking
// that ps's TP and EP sizes divide the model and that the tokenizer is a text
// one, and its tokenizer. No weights yet.
DecodingModel open_for_decoding(const std::string& load, const ParallelState& ps,
                                const char* who);

// Collective: checks that this rank's weights and `cache_bytes` (a decoder's,
// `cache_what` says which on stderr) fit the host's available memory, naming
// `levers` as the fix unless `skip`; then loads the weights (params, state).
void load_weights(DecodingModel& m, const ParallelState& ps, double cache_bytes,
                  const std::string& cache_what, const std::string& levers, bool skip);

// Collective: checks that this rank's weights and a KV cache of `positions`
// (1..context) fit the host's available memory (memory/host_memory.h; every
// rank of a host summed), naming `levers` as the fix unless `skip`; then loads
// the weights and builds the decoder. Rank 0 says the cache's size on stderr.
void load_decoder(DecodingModel& m, const ParallelState& ps, int64_t positions,
                  const std::string& levers, bool skip);

}  // namespace mt
