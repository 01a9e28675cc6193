#include "serve/engine.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"

namespace mt::serve {

namespace {
constexpr int kPlanTag = 7040;  // the size of the next plan, rank 0 to each other rank
enum : int64_t { kFree = 0, kAdd = 1 };
}  // namespace

// A pool call in the order rank 0 made it: free(seq), or add(reserve) and
// the id it returned (-1: it did not fit), which every rank's replay must match.
struct PoolOp {
  int64_t kind, arg, result;
};

struct Engine::Plan {
  bool stop = false;
  std::vector<PoolOp> ops;
  std::vector<DecodeToken> rows;
};

struct Engine::Running {
  std::shared_ptr<RequestStream> req;
  int64_t seq = 0;
  RngStream rng;
  size_t fed = 0;          // prompt tokens fed
  int32_t next = 0;        // the last generated token, fed next
  int64_t generated = 0;
  std::vector<TokenInfo> prompt_lp;
  bool done = false;
};

Engine::Engine(BatchedDecoder& dec, const Communicator& world, int64_t max_queued)
    : dec_(dec), world_(world), max_queued_(max_queued) {}

Engine::~Engine() = default;

Admission Engine::submit(const std::vector<std::shared_ptr<RequestStream>>& reqs) {
  for (const auto& r : reqs) {
    const GenerationParams& p = r->params();
    MT_CHECK(!p.prompt.empty() && int64_t(p.prompt.size()) + p.max_tokens <= max_length(),
             "a request of ", p.prompt.size(), " prompt tokens and ", p.max_tokens,
             " new ones; the engine takes 1 to ", max_length(), " in all (internal error)");
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    if (stopping_) return Admission::kStopping;
    // One request of more prompts than the bound (Megatron allows 128) waits
    // alone: admitted when nothing else waits.
    if (!queue_.empty() && int64_t(queue_.size() + reqs.size()) > max_queued_)
      return Admission::kQueueFull;
    queue_.insert(queue_.end(), reqs.begin(), reqs.end());
  }
  cv_.notify_all();
  return Admission::kQueued;
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
  }
  cv_.notify_all();
}

Engine::Load Engine::load() const {
  std::lock_guard<std::mutex> lock(m_);
  return {int64_t(queue_.size()), running_count_, steps_};
}

Engine::Plan Engine::next_plan(std::vector<RowOwner>& owners) {
  Plan p;
  // Finished and cancelled requests give their blocks back first.
  for (auto it = running_.begin(); it != running_.end();) {
    Running& r = **it;
    if (!r.done && !r.req->cancelled()) {
      ++it;
      continue;
    }
    if (!r.done) r.req->finish(Finish::kCancelled);
    dec_.free_sequence(r.seq);
    p.ops.push_back({kFree, r.seq, 0});
    it = running_.erase(it);
  }
  // Then waiting requests, in order, while the pool holds their whole length.
  {
    std::lock_guard<std::mutex> lock(m_);
    while (!queue_.empty()) {
      std::shared_ptr<RequestStream> req = queue_.front();
      if (req->cancelled()) {
        req->finish(Finish::kCancelled);
        queue_.pop_front();
        continue;
      }
      const GenerationParams& gp = req->params();
      const int64_t reserve = int64_t(gp.prompt.size()) + gp.max_tokens;
      const std::optional<int64_t> seq = dec_.add_sequence(reserve);
      p.ops.push_back({kAdd, reserve, seq.value_or(-1)});
      if (!seq) break;
      queue_.pop_front();
      auto r = std::make_unique<Running>();
      r->req = std::move(req);
      r->seq = *seq;
      r->rng = RngStream::make(gp.seed, "generate");
      running_.push_back(std::move(r));
    }
    running_count_ = int64_t(running_.size());
  }
  // One row for each request that is generating, then the prompts in chunks.
  int64_t budget = dec_.options().max_rows;
  for (auto& r : running_)
    if (r->fed == r->req->params().prompt.size()) {
      p.rows.push_back({r->seq, r->next});
      owners.push_back({r.get(), -1});
      --budget;
    }
  for (auto& r : running_) {
    const std::vector<int32_t>& prompt = r->req->params().prompt;
    for (int64_t k = dec_.rows_per_sequence(); r->fed < prompt.size() && budget > 0 && k > 0;
         ++r->fed, --budget, --k) {
      p.rows.push_back({r->seq, prompt[r->fed]});
      owners.push_back({r.get(), int64_t(r->fed)});
    }
    if (budget == 0) break;
  }
  return p;
}

const float* Engine::apply(const Plan& p, bool replay) {
  if (replay)
    for (const PoolOp& op : p.ops) {
      if (op.kind == kFree) {
        dec_.free_sequence(op.arg);
        continue;
      }
      const int64_t got = dec_.add_sequence(op.arg).value_or(-1);
      MT_CHECK(got == op.result, "serve: this rank's key/value pool gave sequence ", got,
               " where rank 0's gave ", op.result, " (internal error: the ranks' pools differ)");
    }
  if (p.rows.empty()) return nullptr;
  const DecodeStep s = dec_.step(p.rows);
  MT_CHECK(bool(s), "serve: the pool lacks ", s.blocks_short,
           " blocks for a step (internal error: admission reserves every request's length)");
  return s.logits;
}

void Engine::absorb(const float* logits, const std::vector<RowOwner>& owners) {
  const int64_t vocab = dec_.vocab_size();
  for (size_t i = 0; i < owners.size(); ++i) {
    Running& r = *owners[i].run;
    const GenerationParams& gp = r.req->params();
    const float* row = logits + int64_t(i) * dec_.vocab_rows();
    const int64_t pi = owners[i].prompt_index;
    if (pi >= 0 && pi + 1 < int64_t(gp.prompt.size())) {  // a prompt token before the last
      if (gp.prompt_logprobs) {
        const int32_t next = gp.prompt[size_t(pi + 1)];
        r.prompt_lp.push_back({next, log_prob(row, vocab, next),
                               gp.top_logprobs > 0 ? top_log_probs(row, vocab, gp.top_logprobs)
                                                   : std::vector<std::pair<int32_t, double>>{}});
      }
      continue;
    }
    if (pi >= 0 && gp.prompt_logprobs) r.req->set_prompt_logprobs(std::move(r.prompt_lp));
    if (r.generated == gp.max_tokens) {  // max_tokens 0: the prompt's log-probabilities only
      r.done = true;
      r.req->finish(Finish::kLength);
      continue;
    }
    TokenInfo t;
    t.id = sample_token(row, vocab, gp.sampling, r.rng, uint64_t(r.generated), scratch_);
    t.logprob = log_prob(row, vocab, t.id);
    if (gp.top_logprobs > 0) t.top = top_log_probs(row, vocab, gp.top_logprobs);
    const int32_t id = t.id;
    r.req->push(std::move(t));
    ++r.generated;
    r.next = id;
    const bool stop = std::find(gp.stop_ids.begin(), gp.stop_ids.end(), id) != gp.stop_ids.end();
    if (stop || r.generated == gp.max_tokens) {
      r.done = true;
      r.req->finish(stop ? Finish::kStop : Finish::kLength);
    }
  }
}

void Engine::serve() {
  std::vector<RowOwner> owners;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m_);
      const auto busy = [&] { return stopping_ || !queue_.empty() || !running_.empty(); };
      // Idle for a second after work: the requests' heap (their JSON, texts,
      // token lists, on the connection threads' arenas) goes back to the
      // system, so a burst leaves no high-water mark.
      if (!cv_.wait_for(lock, std::chrono::seconds(1), busy) && steps_ > trimmed_at_) {
        trimmed_at_ = steps_;
        lock.unlock();
        malloc_trim(0);
        lock.lock();
      }
      cv_.wait(lock, busy);
      if (stopping_) break;
    }
    owners.clear();
    Plan p = next_plan(owners);
    if (p.ops.empty() && p.rows.empty()) continue;
    send(p);
    try {
      if (const float* logits = apply(p, false)) absorb(logits, owners);
    } catch (const Error& e) {  // every rank fails alike: end this step's requests
      for (const RowOwner& o : owners)
        if (!o.run->done) {
          o.run->done = true;
          o.run->req->finish(Finish::kError, e.what());
        }
    }
    std::lock_guard<std::mutex> lock(m_);
    ++steps_;
  }
  // Stopping: nothing more runs; the waiters learn it, the other ranks end.
  std::lock_guard<std::mutex> lock(m_);
  for (auto& r : running_)
    if (!r->done) r->req->finish(Finish::kCancelled);
  for (auto& q : queue_) q->finish(Finish::kCancelled);
  queue_.clear();
  running_.clear();
  running_count_ = 0;
  Plan end;
  end.stop = true;
  send(end);
}

void Engine::follow() {
  for (;;) {
    const Plan p = receive();
    if (p.stop) return;
    try {
      apply(p, true);
    } catch (const Error&) {  // rank 0 fails the same step's requests and goes on
    }
  }
}

// The wire form: [stop, n_ops, (kind, arg, result)..., n_rows, (seq, token)...].
void Engine::send(const Plan& p) const {
  if (world_.size() <= 1) return;  // one rank (or no group): nothing to tell
  std::vector<int64_t> w{p.stop ? 1 : 0, int64_t(p.ops.size())};
  for (const PoolOp& op : p.ops) w.insert(w.end(), {op.kind, op.arg, op.result});
  w.push_back(int64_t(p.rows.size()));
  for (const DecodeToken& t : p.rows) w.insert(w.end(), {t.seq, int64_t(t.token)});
  uint16_t size[4];
  for (int k = 0; k < 4; ++k) size[k] = uint16_t(uint64_t(w.size()) >> (16 * k));
  for (int r = 1; r < world_.size(); ++r) world_.send(size, 4, r, kPlanTag);
  world_.broadcast(w.data(), w.size() * sizeof(int64_t), 0);
}

Engine::Plan Engine::receive() const {
  uint16_t size[4];
  CommHandle h = world_.irecv(size, 4, 0, kPlanTag);
  while (!h.test()) usleep(200);  // idle between requests: a sleeping poll, not a spin
  uint64_t n = 0;
  for (int k = 0; k < 4; ++k) n |= uint64_t(size[k]) << (16 * k);
  std::vector<int64_t> w(static_cast<size_t>(n));
  world_.broadcast(w.data(), w.size() * sizeof(int64_t), 0);
  Plan p;
  size_t i = 0;
  p.stop = w.at(i++) != 0;
  const int64_t ops = w.at(i++);
  for (int64_t k = 0; k < ops; ++k, i += 3) p.ops.push_back({w.at(i), w.at(i + 1), w.at(i + 2)});
  const int64_t rows = w.at(i++);
  for (int64_t k = 0; k < rows; ++k, i += 2) p.rows.push_back({w.at(i), int32_t(w.at(i + 1))});
  return p;
}

}  // namespace mt::serve
