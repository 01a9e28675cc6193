// megatron/decoding.h — a checkpoint decoding many prompts at once, as a
// library call: the engine of `megatron serve` (continuous batching over a
// paged key/value cache) without its HTTP server.
//
// A DecodingSession loads a checkpoint (a --save directory of `megatron train`,
// or one `megatron convert` wrote) with its own tokenizer, split over the MPI
// world as `generate` splits it: TP ranks share each layer, EP ranks split an
// MoE model's experts (the world is lcm(TP, EP) ranks). generate() is
// collective: every rank calls it, rank 0's prompts are decoded (the other
// ranks' are ignored) and rank 0 gets the completions; the others get none.
// Each prompt samples from its own stream (`generate --seed`'s, seed + its
// index), so a completion does not depend on the others in the batch and is
// what `megatron generate` gives for that prompt and seed.
//
// MPI: the session initialises MPI unless the program has, and finalises it
// when destroyed (so a process holds one session unless it initialises MPI
// itself). An error on any rank ends the whole job (one line, MPI_Abort).
//
//   megatron::DecodingSession s({.load = "ckpt", .tensor_parallel = 2});
//   for (const auto& c : s.generate({"Once upon", "The king"}, {.max_tokens = 20}))
//     std::printf("%s\n", c.text.c_str());
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megatron {

struct DecodingOptions {
  std::string load;                // the checkpoint directory
  int tensor_parallel = 1;         // TP ranks per copy of the model
  int expert_parallel = 1;         // MoE: ranks splitting the experts
  int64_t max_sequences = 8;       // prompts decoded at once (the rest wait)
  int64_t max_length = 0;          // prompt + new tokens of one sequence at most (0: the context)
  int64_t block_size = 16;         // tokens per key/value cache block
  int64_t max_step_tokens = 256;   // tokens one step feeds (decoding rows + prompt chunks)
  bool skip_memory_check = false;  // allocate even past the host's available memory
};

struct Sampling {
  int64_t max_tokens = 16;   // new tokens at most
  double temperature = 0;    // 0: greedy
  int64_t top_k = 0;         // 0: off
  double top_p = 0;          // 0 or 1: off
  uint64_t seed = 0;         // prompt i samples as `generate --seed` seed + i
  bool stop_at_eod = true;   // end a completion at the tokenizer's end of document
};

struct Completion {
  std::vector<int32_t> prompt_tokens;  // what the model conditioned on
  std::vector<int32_t> tokens;         // generated (the end of document too, when it stopped)
  std::vector<double> log_probs;       // each generated token's (temperature 1, real vocabulary)
  std::string text;                    // the tokens detokenized
  std::string finish;                  // "length" (max_tokens) or "stop" (end of document)
};

class DecodingSession {
 public:
  // Collective over the MPI world (its size must be lcm(TP, EP)). Throws
  // std::invalid_argument for options out of range.
  explicit DecodingSession(const DecodingOptions& options);
  ~DecodingSession();
  DecodingSession(const DecodingSession&) = delete;
  DecodingSession& operator=(const DecodingSession&) = delete;

  // The checkpoint's tokenizer (ids as its training data's).
  std::vector<int32_t> tokenize(const std::string& text) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;
  int64_t vocab_size() const;  // the real vocabulary (no padding rows)
  int64_t max_length() const;  // prompt + new tokens of one sequence at most
  int world_rank() const;

  // Collective. Rank 0: one completion per prompt, in order; other ranks: {}.
  // A prompt is at least one token, and prompt + max_tokens at most
  // max_length() (else std::invalid_argument on rank 0, before any decoding).
  std::vector<Completion> generate(const std::vector<std::string>& prompts,
                                   const Sampling& sampling);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
