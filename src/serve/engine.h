// The serving engine: continuous batching over the batched decoder
// (model/batched_decoder.h), as Megatron's dynamic inference engine and
// vLLM's scheduler. Requests wait in a bounded queue; at every step the
// engine frees the sequences of requests that finished or were cancelled,
// admits waiting ones whose whole length (prompt + max_tokens) the cache
// pool can hold now (so no admitted request is ever pre-empted), and feeds
// one row per decoding request plus chunks of the prompts being read
// (prefill) in the rest of the step's rows, so a long prompt does not stall
// the others. Each request samples from its own stream (its seed, the n-th
// draw for its n-th token: `generate --seed`'s), so its answer does not
// depend on what else is in the batch.
//
// Ranks: rank 0's MPI thread runs serve(), the others follow(): each step's
// plan (the pool calls in order, then the rows) goes from rank 0 to all, and
// every rank makes the same decoder calls, so the TP ranks' caches and EP
// ranks' experts stay in step; the logits reach every rank, rank 0 samples.
// The followers wait for a plan without spinning (a polled receive).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <vector>

#include "comm/communicator.h"
#include "model/batched_decoder.h"
#include "serve/request_stream.h"

namespace mt::serve {

enum class Admission { kQueued, kQueueFull, kStopping };

class Engine {
 public:
  // world: every rank of the model (its rank 0 serves); max_queued: waiting
  // requests at most (more are refused, HTTP 429).
  Engine(BatchedDecoder& dec, const Communicator& world, int64_t max_queued);
  ~Engine();

  // Any thread on rank 0: queues every one of `reqs` or none (none when
  // they would pass max_queued, unless nothing else waits).
  Admission submit(const std::vector<std::shared_ptr<RequestStream>>& reqs);
  // Rank 0's MPI thread: steps until stop(), then tells the others to end.
  void serve();
  // The other ranks: replay rank 0's plans until it ends.
  void follow();
  // Any thread: stop() makes serve() cancel what is queued and running and return.
  void stop();

  struct Load {
    int64_t queued = 0, running = 0, steps = 0;
  };
  Load load() const;
  // The length (prompt + max_tokens) a request may have.
  int64_t max_length() const { return dec_.options().max_positions; }

 private:
  struct Running;
  struct Plan;
  struct RowOwner {
    Running* run;
    int64_t prompt_index;  // the prompt token this row feeds; -1: a generated token
  };
  Plan next_plan(std::vector<RowOwner>& owners);
  const float* apply(const Plan& p, bool replay);
  void absorb(const float* logits, const std::vector<RowOwner>& owners);
  void send(const Plan& p) const;
  Plan receive() const;

  BatchedDecoder& dec_;
  const Communicator& world_;
  const int64_t max_queued_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<RequestStream>> queue_;
  bool stopping_ = false;
  int64_t steps_ = 0, trimmed_at_ = 0;
  std::vector<std::unique_ptr<Running>> running_;  // the MPI thread's, admission order
  int64_t running_count_ = 0;                      // its size, for load()
  std::vector<float> scratch_;
};

}  // namespace mt::serve
