// megatron/decoding.h — a checkpoint decoding text, as a library call: many
// prompts at once (DecodingSession: the engine of `megatron serve`, continuous
// batching over a paged key/value cache, without its HTTP server), or one
// prompt streamed token by token (Generator: `megatron generate`).
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
//
// A Generator is `megatron generate`: one prompt over the same ranks (the
// same MPI rules), its new tokens streamed to a callback as they come, each
// with the text `megatron generate` prints for it (the same tokens for the
// same seed: its sampling stream, its context window that restarts on its
// last half when full). It is built from options, or from the command's words
// (its flags and `--config`, parsed and refused as the binary does:
// megatron/flags.h), and run() is the command.
//
//   megatron::Generator g({.load = "ckpt", .prompt = "Once upon", .max_new_tokens = 20});
//   g.generate([](const megatron::GeneratedToken& t) { std::fputs(t.text.c_str(), stdout); });
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "megatron/flags.h"

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

// `megatron generate`'s flags as fields (same names, same defaults).
struct GenerateOptions {
  std::string load;                // --load: the checkpoint directory
  std::string prompt = "\n";       // --prompt: the text to continue (at least one token)
  int64_t max_new_tokens = 200;    // --max-new-tokens (0: the prompt only)
  double temperature = 1;          // --temperature (0: greedy)
  int64_t top_k = 0;               // --top-k (0: off)
  double top_p = 0;                // --top-p (0 or 1: off)
  uint64_t seed = 1234;            // --seed
  int tensor_parallel = 1;         // --tensor-model-parallel-size
  int expert_parallel = 1;         // --expert-model-parallel-size
  bool skip_memory_check = false;  // --skip-memory-check
};

// One new token, as it comes.
struct GeneratedToken {
  int64_t index = 0;     // 0, 1, ...: its place among the new tokens
  int32_t id = 0;
  double log_prob = 0;   // temperature 1, over the real vocabulary
  // What `megatron generate` prints for it: the characters it completes (a
  // character spanning several tokens comes whole with its last), and with the
  // last token (or the end of document, which prints nothing itself) whatever
  // was held back. The texts of all tokens, in order, are the command's output
  // after the prompt.
  std::string text;
};

// What `megatron generate --output-json` writes.
struct Generation {
  std::vector<int32_t> prompt_tokens;  // what the model conditioned on
  std::vector<int32_t> tokens;         // generated (the end of document too, when it stopped)
  std::vector<double> log_probs;       // each generated token's (temperature 1, real vocabulary)
  std::string text;                    // the tokens detokenized
  bool prompt_truncated = false;       // the prompt was longer than the context: its end
  bool context_slid = false;           // the window restarted on its last half at least once
};

class Generator {
 public:
  // Throws std::invalid_argument for options out of range (the message names
  // the flag, as the command's).
  explicit Generator(const GenerateOptions& options);
  // `flags`: the words after `megatron generate`. Throws FlagError (FlagHelp
  // for --help); values out of range end the job at run(), as the command.
  explicit Generator(const std::vector<std::string>& flags);
  // Finalises MPI if generate() / run() initialised it (so a process holds
  // one Generator unless it initialises MPI itself).
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  const GenerateOptions& options() const;

  // Collective over the MPI world (lcm(TP, EP) ranks, which it initialises
  // unless the program has), once: every rank checks that the others run the
  // same options, loads the checkpoint with a key/value cache of the prompt +
  // max_new_tokens (at most the context), decodes the prompt (its last
  // context tokens when longer) and samples max_new_tokens new tokens (fewer
  // at the end of document), calling `on_token` for each as it comes. Every
  // rank gets the same tokens and result. Rank 0 says on stderr what
  // `megatron generate` says there (the cache's size, a prompt cut, the first
  // time the window restarts). Any error ends the whole job (one line,
  // MPI_Abort); a second call throws std::logic_error.
  Generation generate(const std::function<void(const GeneratedToken&)>& on_token = {});

  // `megatron generate`: generate() with rank 0 printing the prompt, each
  // token's text as it comes and a newline on stdout, then writing
  // --output-json. Returns what the command exits with (0).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
