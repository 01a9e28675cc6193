// megatron::DecodingSession (include/megatron/decoding.h): the checkpoint as
// `megatron serve` loads it (decoding/decoding_model.h), its batched decoder and
// engine (serve/engine.h), driven by a list of prompts instead of HTTP.
#include "megatron/decoding.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "decoding/decoding_model.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "core/error.h"
#include "model/batched_decoder.h"
#include "serve/engine.h"
#include "serve/request_stream.h"

namespace megatron {

struct DecodingSession::Impl {
  mt::MpiEnv mpi;
  std::unique_ptr<mt::ParallelState> ps;
  mt::DecodingModel model;
  mt::BatchedDecoderOptions opt;
  std::unique_ptr<mt::BatchedDecoder> dec;
};

namespace {

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// What a session's options mean to the batched decoder (serve's sizes): a
// pool for every sequence at its longest.
mt::BatchedDecoderOptions decoder_options(const DecodingOptions& o, int64_t context) {
  mt::BatchedDecoderOptions d;
  d.max_positions = o.max_length > 0 ? std::min(o.max_length, context) : context;
  d.block_size = std::min(o.block_size, d.max_positions);
  d.max_sequences = o.max_sequences;
  d.max_rows = o.max_step_tokens;
  d.tokens = o.max_sequences * ((d.max_positions + d.block_size - 1) / d.block_size * d.block_size);
  return d;
}

}  // namespace

DecodingSession::DecodingSession(const DecodingOptions& o) : impl_(std::make_unique<Impl>()) {
  check(!o.load.empty(), "DecodingOptions::load: the checkpoint directory is empty");
  check(o.tensor_parallel >= 1 && o.expert_parallel >= 1,
        "DecodingOptions: tensor_parallel " + std::to_string(o.tensor_parallel) +
            " and expert_parallel " + std::to_string(o.expert_parallel) + " must be >= 1");
  check(o.max_sequences >= 1 && o.block_size >= 1 && o.max_step_tokens >= 1 && o.max_length >= 0,
        "DecodingOptions: max_sequences, block_size and max_step_tokens must be >= 1, "
        "max_length >= 0");
  Impl& s = *impl_;
  try {
    mt::DecodingLayout layout;
    layout.tp = o.tensor_parallel;
    layout.ep = o.expert_parallel;
    s.ps = std::make_unique<mt::ParallelState>(
        mt::decoding_parallel_config(layout, s.mpi.world_size(), "DecodingSession"));
    s.model = mt::open_for_decoding(o.load, *s.ps, "DecodingSession");
    s.opt = decoder_options(o, s.model.context());
    mt::load_weights(s.model, *s.ps, mt::BatchedDecoder::planned_bytes(*s.model.reg, s.opt),
                     "key/value cache of " + std::to_string(s.opt.max_sequences) +
                         " sequences of up to " + std::to_string(s.opt.max_positions) + " tokens",
                     "lower DecodingOptions::max_sequences or max_length, or set "
                     "skip_memory_check",
                     o.skip_memory_check);
    s.dec = std::make_unique<mt::BatchedDecoder>(
        *s.model.reg, reinterpret_cast<const float*>(s.model.params.data()), s.opt,
        mt::TensorParallel{&s.ps->tp_comm, false}, s.ps->ep_size > 1 ? &s.ps->ep_comm : nullptr);
  } catch (const mt::Error& e) {
    mt::abort_job(e.what());
  }
}

DecodingSession::~DecodingSession() = default;

std::vector<int32_t> DecodingSession::tokenize(const std::string& text) const {
  return impl_->model.tok->tokenize(text);
}

std::string DecodingSession::detokenize(const std::vector<int32_t>& ids) const {
  for (const int32_t id : ids)
    check(id >= 0 && id < vocab_size(), "detokenize: token id " + std::to_string(id) +
                                            " is outside the vocabulary [0, " +
                                            std::to_string(vocab_size()) + ")");
  return impl_->model.tok->detokenize(ids);
}

int64_t DecodingSession::vocab_size() const { return impl_->model.cfg.vocab_size; }
int64_t DecodingSession::max_length() const { return impl_->opt.max_positions; }
int DecodingSession::world_rank() const { return impl_->ps->world_rank; }

std::vector<Completion> DecodingSession::generate(const std::vector<std::string>& prompts,
                                                  const Sampling& sampling) {
  Impl& s = *impl_;
  const bool rank0 = s.ps->world_rank == 0;
  // Rank 0 checks its prompts and tells the others whether decoding starts
  // (so that no rank waits for plans that never come).
  std::vector<mt::serve::GenerationParams> params;
  std::string bad;
  if (rank0) {
    if (sampling.max_tokens < 1) bad = "Sampling::max_tokens " +
                                       std::to_string(sampling.max_tokens) + " must be >= 1";
    if (sampling.temperature < 0 || sampling.top_k < 0 || sampling.top_p < 0 || sampling.top_p > 1)
      bad = "Sampling: temperature and top_k must be >= 0, top_p in [0, 1]";
    for (size_t i = 0; i < prompts.size() && bad.empty(); ++i) {
      mt::serve::GenerationParams p;
      p.prompt = s.model.tok->tokenize(prompts[i]);
      p.max_tokens = sampling.max_tokens;
      p.sampling.temperature = float(sampling.temperature);
      p.sampling.top_k = sampling.top_k;
      p.sampling.top_p = float(sampling.top_p);
      p.seed = sampling.seed + i;
      if (sampling.stop_at_eod && s.model.tok->eod() >= 0) p.stop_ids = {s.model.tok->eod()};
      const int64_t length = int64_t(p.prompt.size()) + p.max_tokens;
      if (p.prompt.empty())
        bad = "prompt " + std::to_string(i) + " is no token; give it some text";
      else if (length > max_length())
        bad = "prompt " + std::to_string(i) + " is " + std::to_string(p.prompt.size()) +
              " tokens, + max_tokens " + std::to_string(p.max_tokens) + " = " +
              std::to_string(length) + " past max_length " + std::to_string(max_length()) +
              "; shorten it, lower max_tokens, or open the session with a larger max_length "
              "(at most the model's context)";
      params.push_back(std::move(p));
    }
  }
  int go = rank0 && bad.empty() && !prompts.empty();
  s.ps->world_comm.broadcast(&go, sizeof go, 0);
  if (!go) {
    if (!bad.empty()) throw std::invalid_argument(bad);
    return {};
  }
  mt::serve::Engine engine(*s.dec, s.ps->world_comm, int64_t(prompts.size()));
  if (!rank0) {
    engine.follow();
    return {};
  }
  std::vector<std::shared_ptr<mt::serve::RequestStream>> streams;
  for (mt::serve::GenerationParams& p : params)
    streams.push_back(std::make_shared<mt::serve::RequestStream>(std::move(p)));
  MT_CHECK(engine.submit(streams) == mt::serve::Admission::kQueued,
           "DecodingSession: the engine refused ", streams.size(), " prompts");
  // This thread makes the MPI calls (engine.serve()); a waiter stops the
  // engine once every stream has ended.
  std::vector<mt::serve::StreamSnapshot> ends(streams.size());
  std::thread waiter([&] {
    for (size_t i = 0; i < streams.size(); ++i)
      do ends[i] = streams[i]->wait(0, std::chrono::milliseconds(100));
      while (ends[i].finish == mt::serve::Finish::kRunning);
    engine.stop();
  });
  engine.serve();
  waiter.join();
  std::vector<Completion> out;
  for (size_t i = 0; i < streams.size(); ++i) {
    const mt::serve::StreamSnapshot& e = ends[i];
    MT_CHECK(e.finish == mt::serve::Finish::kLength || e.finish == mt::serve::Finish::kStop,
             "DecodingSession: prompt ", i, " ended with an error: ", e.error);
    Completion c;
    c.prompt_tokens = streams[i]->params().prompt;
    for (const mt::serve::TokenInfo& t : e.tokens) {
      c.tokens.push_back(t.id);
      c.log_probs.push_back(t.logprob);
    }
    c.text = s.model.tok->detokenize(c.tokens);
    c.finish = e.finish == mt::serve::Finish::kStop ? "stop" : "length";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace megatron
