// megatron::Generator (include/megatron/decoding.h): `megatron generate` as a
// library call. Its flags (declared here, parsed by flags/command_words.h), the
// checkpoint loaded for decoding (decoding/decoding_model.h) with a cache of
// the prompt + new tokens, and the single-sequence decoder's loop with its
// sampling stream and sliding window. The binary's `generate`
// (cli/generate_cmd.cc) is a client of it.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "api/job_errors.h"
#include "args/run_args_check.h"
#include "checkpoint/atomic_file.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "data/tokenizer.h"
#include "decoding/decoding_model.h"
#include "flags/command_words.h"
#include "flags/strict_numbers.h"
#include "megatron/decoding.h"
#include "model/sampling.h"

namespace megatron {

namespace {

// Positions of the key/value cache: the prompt (already cut to the context)
// and the new tokens, at most the model's context (past it the window slides).
int64_t cache_positions(int64_t prompt_tokens, int64_t max_new_tokens, int64_t context) {
  return max_new_tokens >= context - prompt_tokens ? context : prompt_tokens + max_new_tokens;
}

// Throws mt::Error naming the flag out of range.
void check_options(const GenerateOptions& o) {
  MT_CHECK(o.max_new_tokens >= 0, "--max-new-tokens ", o.max_new_tokens,
           " must be >= 0 (0: print the prompt only)");
  MT_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, "--temperature ",
           float(o.temperature), " must be a finite number >= 0 (0: greedy)");
  MT_CHECK(o.top_k >= 0, "--top-k ", o.top_k, " must be >= 0 (0: off)");
  MT_CHECK(o.top_p >= 0 && o.top_p <= 1, "--top-p ", float(o.top_p),
           " must be in [0, 1] (0 or 1: off)");
}


// The flags the binary's `generate` binds; the sampling ones as the float the
// sampler takes (so a value reaches it exactly as the command parsed it).
struct GenerateFlags {
  GenerateOptions o;
  float temperature = 1.0f, top_p = 0.f;
  mt::DecodingLayout layout;
  std::string output_json;  // --output-json: ids and log-probabilities
};

void add_generate_flags(CLI::App& app, GenerateFlags& f) {
  GenerateOptions& o = f.o;
  app.add_option("--load", o.load, "checkpoint directory (a --save of megatron train)")->required();
  app.add_option("--prompt", o.prompt, "text to continue");
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate");
  app.add_option("--temperature", f.temperature, "softmax temperature (0: greedy)");
  app.add_option("--top-k", o.top_k, "sample among the k most likely (0: off)");
  app.add_option("--top-p", f.top_p, "nucleus sampling mass (0: off)");
  app.add_option("--seed", o.seed, "sampling seed");
  app.add_option("--output-json", f.output_json,
                 "also write {prompt, prompt_tokens, tokens, log_probs, text} here: the ids the "
                 "model conditioned on and generated, and each generated token's log-probability "
                 "(temperature 1, over the real vocabulary)");
  mt::add_decoding_layout_options(app, f.layout,
                                  "TP size to decode with (launch that many ranks with mpirun); "
                                  "the checkpoint is re-sharded if it was saved with another");
  app.add_flag("--skip-memory-check", o.skip_memory_check,
               "allocate even if weights and key/value cache exceed the host's available memory");
  app.footer(
      "Context window: the model sees at most --seq-length tokens (its context, recorded in\n"
      "  the checkpoint). A longer prompt is cut to its last tokens that fit. When prompt and\n"
      "  generated text fill the context, it restarts on its last half: the key/value cache is\n"
      "  rebuilt from the last seq-length/2 tokens and generation goes on, so each token then\n"
      "  conditions on the last seq-length/2 to seq-length tokens, not on all before it.\n"
      "  Both are said once on stderr; --output-json marks them (prompt_truncated, context_slid).\n"
      "Memory: the key/value cache holds the prompt's tokens + --max-new-tokens, at most the\n"
      "  context; its size is said on stderr, and a request that does not fit the host's\n"
      "  available memory is refused before anything is allocated.");
  mt::make_integer_options_strict(app);
}

}  // namespace

struct Generator::Impl {
  GenerateOptions options;
  std::string output_json;
  bool used = false;
  // Declared first: MPI outlives the model's communicators.
  std::unique_ptr<mt::MpiEnv> mpi;
  std::unique_ptr<mt::ParallelState> ps;
  mt::DecodingModel model;
  std::vector<int32_t> context;  // the prompt's tokens conditioned on
  bool truncated = false;

  void load();
  Generation decode(const std::function<void(const GeneratedToken&)>& on_token);
};

// Collective: the layout, the same options on every rank, the checkpoint and a
// cache for the prompt + new tokens.
void Generator::Impl::load() {
  const GenerateOptions& o = options;
  mpi = std::make_unique<mt::MpiEnv>();
  mt::DecodingLayout layout;
  layout.tp = o.tensor_parallel;
  layout.ep = o.expert_parallel;
  ps = std::make_unique<mt::ParallelState>(
      mt::decoding_parallel_config(layout, mpi->world_size(), "generate"));
  // Every rank decodes: another prompt, seed or sampling flag on one rank
  // would diverge (args/run_args_check.h).
  mt::check_same_arguments({{"--load", o.load},
                            {"--prompt", o.prompt},
                            {"--max-new-tokens", std::to_string(o.max_new_tokens)},
                            {"--temperature", mt::arg_value_text(float(o.temperature))},
                            {"--top-k", std::to_string(o.top_k)},
                            {"--top-p", mt::arg_value_text(float(o.top_p))},
                            {"--seed", std::to_string(o.seed)}},
                           ps->world_comm);
  model = mt::open_for_decoding(o.load, *ps, "generate");
  context = model.tok->tokenize(o.prompt);
  MT_CHECK(!context.empty(), "--prompt is empty; give at least one character");
  // A prompt longer than the context: condition on its end, which is what
  // the continuation follows (its beginning would be forgotten anyway).
  const size_t capacity = size_t(model.context());
  truncated = context.size() > capacity;
  if (truncated) {
    if (ps->world_rank == 0)
      std::fprintf(stderr, "generate: the prompt has %zu tokens, more than the model's context "
                   "of %zu; conditioning on its last %zu\n", context.size(), capacity, capacity);
    context.erase(context.begin(), context.end() - std::ptrdiff_t(capacity));
  }
  const int64_t positions =
      cache_positions(int64_t(context.size()), o.max_new_tokens, model.context());
  mt::load_decoder(model, *ps, positions,
                   "lower --max-new-tokens (" + std::to_string(o.max_new_tokens) + ") or shorten "
                   "--prompt (" + std::to_string(context.size()) + " tokens): the key/value cache "
                   "holds both, " + std::to_string(positions) + " positions; or pass "
                   "--skip-memory-check to try anyway",
                   o.skip_memory_check);
}

// Collective: the prompt, then the new tokens, each told to on_token as it comes.
Generation Generator::Impl::decode(const std::function<void(const GeneratedToken&)>& on_token) {
  const GenerateOptions& o = options;
  mt::GptDecoder& dec = *model.dec;
  const mt::Tokenizer& tok = *model.tok;
  mt::SamplingConfig sampling;
  sampling.temperature = float(o.temperature);
  sampling.top_k = o.top_k;
  sampling.top_p = float(o.top_p);
  const mt::RngStream rng = mt::RngStream::make(o.seed, "generate");
  std::vector<float> scratch;
  const float* logits = nullptr;
  for (int32_t t : context) logits = dec.step(t);
  mt::StreamingDetokenizer stream(tok);
  Generation g;
  g.prompt_tokens = context;
  g.prompt_truncated = truncated;
  const size_t capacity = size_t(model.context());
  const int64_t vocab = model.cfg.vocab_size;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    GeneratedToken t;
    t.index = i;
    t.id = mt::sample_token(logits, vocab, sampling, rng, uint64_t(i), scratch);
    t.log_prob = mt::log_prob(logits, vocab, t.id);
    g.tokens.push_back(t.id);
    g.log_probs.push_back(t.log_prob);
    const bool eod = t.id == tok.eod();
    // A character may span several tokens: its text comes when complete.
    t.text = eod ? stream.finish() : stream.push(t.id);
    if (!eod && i + 1 == o.max_new_tokens) t.text += stream.finish();
    if (on_token) on_token(t);
    if (eod) break;
    context.push_back(t.id);
    if (dec.position() == dec.context()) {  // slide: keep the last half, re-encode it
      const size_t keep = size_t(dec.context() / 2);
      if (ps->world_rank == 0 && !g.context_slid) {  // once: every later slide is the same
        std::fflush(stdout);  // on a terminal, after the text so far, on a line of its own
        std::fprintf(stderr, "%sgenerate: the context of %zu tokens is full; it restarts on "
                     "its last %zu tokens, and again each time it fills: from here on each "
                     "token conditions on the last %zu to %zu tokens only\n",
                     isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) ? "\n" : "", capacity,
                     keep, keep, capacity);
      }
      g.context_slid = true;
      dec.reset();
      for (size_t j = context.size() - keep; j < context.size(); ++j) logits = dec.step(context[j]);
    } else {
      logits = dec.step(t.id);
    }
  }
  g.text = tok.detokenize(g.tokens);
  return g;
}

Generator::Generator(const GenerateOptions& options) : impl_(std::make_unique<Impl>()) {
  try {
    check_options(options);
  } catch (const mt::Error& e) {
    throw std::invalid_argument(e.what());
  }
  if (options.load.empty())
    throw std::invalid_argument("GenerateOptions::load: the checkpoint directory is empty");
  impl_->options = options;
}

Generator::Generator(const std::vector<std::string>& flags) : impl_(std::make_unique<Impl>()) {
  CLI::App app{"megatron.cpp as a library: megatron generate"};
  app.require_subcommand(1);
  CLI::App* gen = app.add_subcommand("generate", "generate text from a checkpoint");
  GenerateFlags f;
  add_generate_flags(*gen, f);
  mt::parse_command_words(app, *gen, flags);
  f.o.temperature = f.temperature;
  f.o.top_p = f.top_p;
  f.o.tensor_parallel = f.layout.tp;
  f.o.expert_parallel = f.layout.ep;
  impl_->options = f.o;
  impl_->output_json = f.output_json;
}

Generator::~Generator() = default;

const GenerateOptions& Generator::options() const { return impl_->options; }

Generation Generator::generate(const std::function<void(const GeneratedToken&)>& on_token) {
  Impl& s = *impl_;
  if (s.used) throw std::logic_error("megatron::Generator::generate() or run() twice");
  s.used = true;
  return mt::ending_job_on_error([&] {
    s.load();
    return s.decode(on_token);
  });
}

int Generator::run() {
  Impl& s = *impl_;
  if (s.used) throw std::logic_error("megatron::Generator::generate() or run() twice");
  s.used = true;
  return mt::ending_job_on_error([&] {
    const GenerateOptions& o = s.options;
    check_options(o);
    // Before anything is read or written: --output-json must not replace a
    // file of the checkpoint it decodes (core/output_guard.h).
    mt::OutputGuard paths;
    paths.reads_dir("--load", o.load, mt::OutputGuard::checkpoint_names());
    paths.writes_file("--output-json", s.output_json);
    paths.check();
    s.load();
    FILE* out = s.ps->world_rank == 0 ? stdout : nullptr;  // every rank decodes; rank 0 prints
    if (out) std::fputs(o.prompt.c_str(), out);
    const Generation g = s.decode([out](const GeneratedToken& t) {
      if (!out) return;
      std::fputs(t.text.c_str(), out);
      std::fflush(out);
    });
    if (out) std::fputs("\n", out);
    if (out && !s.output_json.empty()) {
      nlohmann::json j = {{"prompt", o.prompt},
                          {"prompt_tokens", g.prompt_tokens},
                          {"tokens", g.tokens},
                          {"log_probs", g.log_probs},
                          {"text", g.text}};
      if (g.context_slid) j["context_slid"] = true;
      if (g.prompt_truncated) j["prompt_truncated"] = true;  // prompt_tokens: the part conditioned on
      // Byte tokens can end mid-character: invalid UTF-8 becomes U+FFFD, as printed.
      mt::atomic_write_text(s.output_json,
                            j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
    return 0;
  });
}

}  // namespace megatron
