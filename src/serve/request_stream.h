// One generation request as the engine (serve/engine.h) and the HTTP thread
// that waits for it share it: what to generate (GenerationParams, fixed
// once submitted), and what came out so far (each prompt token's and each
// new token's log-probability, the finish), appended by the engine and read
// by the HTTP thread, which may cancel it (its client went away, a stop
// string matched).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/sampling.h"

namespace mt::serve {

struct GenerationParams {
  std::vector<int32_t> prompt;      // token ids, at least one
  int64_t max_tokens = 16;          // new tokens at most (0: only the prompt's log-probabilities)
  SamplingConfig sampling;          // temperature 0: greedy
  uint64_t seed = 0;                // the sampling stream's (`generate --seed`'s)
  std::vector<int32_t> stop_ids;    // generation ends after one of these
  bool prompt_logprobs = false;     // each prompt token's log-probability after the first
  int top_logprobs = 0;             // alternatives per token (the most likely ones)
};

// A token and its natural-log probability (temperature 1, the real
// vocabulary), with the most likely alternatives when asked for.
struct TokenInfo {
  int32_t id = 0;
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;
};

enum class Finish { kRunning, kLength, kStop, kCancelled, kError };

// What a waiter sees: copies, taken under the lock.
struct StreamSnapshot {
  std::vector<TokenInfo> prompt;     // prompt_logprobs: one per prompt token after the first
  std::vector<TokenInfo> tokens;     // the new tokens from index `from` on
  Finish finish = Finish::kRunning;
  std::string error;                 // kError: why
};

class RequestStream {
 public:
  explicit RequestStream(GenerationParams p) : params_(std::move(p)) {}
  const GenerationParams& params() const { return params_; }

  // HTTP side. Waits until there are new tokens past `from`, the request
  // has finished, or `timeout` passed; returns what there is.
  StreamSnapshot wait(size_t from, std::chrono::milliseconds timeout);
  // Ends it: the engine frees its cache at its next step.
  void cancel() { cancelled_.store(true); }
  // Seconds from submission to the first new token (-1 before it).
  double first_token_seconds() const;

  // Engine side.
  bool cancelled() const { return cancelled_.load(); }
  void set_prompt_logprobs(std::vector<TokenInfo> lp);
  void push(TokenInfo t);
  void finish(Finish f, std::string error = "");

 private:
  const GenerationParams params_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<TokenInfo> prompt_, tokens_;
  Finish finish_ = Finish::kRunning;
  std::string error_;
  const std::chrono::steady_clock::time_point submitted_ = std::chrono::steady_clock::now();
  double first_token_s_ = -1;
};

}  // namespace mt::serve
