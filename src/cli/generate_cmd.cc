// `megatron generate`: load a checkpoint, stream text from a prompt.
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "checkpoint/atomic_file.h"
#include "cli/commands.h"
#include "flags/strict_numbers.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "data/tokenizer.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "decoding/decoding_model.h"
#include "model/sampling.h"
#include "args/run_args_check.h"

namespace mt {

namespace {
struct GenerateArgs {
  std::string load, prompt = "\n";
  int64_t max_new_tokens = 200;
  SamplingConfig sampling;
  uint64_t seed = 1234;
  DecodingLayout layout;
  std::string output_json;  // --output-json: ids and log-probabilities
  bool skip_memory_check = false;
};

// Positions of the key/value cache: the prompt (already cut to the context)
// and the new tokens, at most the model's context (past it the window slides).
int64_t cache_positions(int64_t prompt_tokens, int64_t max_new_tokens, int64_t context) {
  return max_new_tokens >= context - prompt_tokens ? context : prompt_tokens + max_new_tokens;
}

void check_generate_args(const GenerateArgs& a) {
  const SamplingConfig& c = a.sampling;
  MT_CHECK(a.max_new_tokens >= 0, "--max-new-tokens ", a.max_new_tokens,
           " must be >= 0 (0: print the prompt only)");
  MT_CHECK(std::isfinite(c.temperature) && c.temperature >= 0, "--temperature ", c.temperature,
           " must be a finite number >= 0 (0: greedy)");
  MT_CHECK(c.top_k >= 0, "--top-k ", c.top_k, " must be >= 0 (0: off)");
  MT_CHECK(c.top_p >= 0 && c.top_p <= 1, "--top-p ", c.top_p, " must be in [0, 1] (0 or 1: off)");
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.add_option("--load", a->load, "checkpoint directory (a --save of megatron train)")->required();
  app.add_option("--prompt", a->prompt, "text to continue");
  app.add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate");
  app.add_option("--temperature", a->sampling.temperature, "softmax temperature (0: greedy)");
  app.add_option("--top-k", a->sampling.top_k, "sample among the k most likely (0: off)");
  app.add_option("--top-p", a->sampling.top_p, "nucleus sampling mass (0: off)");
  app.add_option("--seed", a->seed, "sampling seed");
  app.add_option("--output-json", a->output_json,
                 "also write {prompt, prompt_tokens, tokens, log_probs, text} here: the ids the "
                 "model conditioned on and generated, and each generated token's log-probability "
                 "(temperature 1, over the real vocabulary)");
  add_decoding_layout_options(app, a->layout,
                              "TP size to decode with (launch that many ranks with mpirun); the "
                              "checkpoint is re-sharded if it was saved with another");
  app.add_flag("--skip-memory-check", a->skip_memory_check,
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
  make_integer_options_strict(app);
  return [a]() {
    check_generate_args(*a);
    // Before anything is read or written: --output-json must not replace a
    // file of the checkpoint it decodes (core/output_guard.h).
    OutputGuard paths;
    paths.reads_dir("--load", a->load, OutputGuard::checkpoint_names());
    paths.writes_file("--output-json", a->output_json);
    paths.check();
    MpiEnv mpi;
    const ParallelConfig pc = decoding_parallel_config(a->layout, mpi.world_size(), "generate");
    ParallelState ps(pc);
    // Every rank decodes: another prompt, seed or sampling flag on one rank
    // would diverge (args/run_args_check.h).
    check_same_arguments({{"--load", a->load},
                          {"--prompt", a->prompt},
                          {"--max-new-tokens", std::to_string(a->max_new_tokens)},
                          {"--temperature", arg_value_text(a->sampling.temperature)},
                          {"--top-k", std::to_string(a->sampling.top_k)},
                          {"--top-p", arg_value_text(a->sampling.top_p)},
                          {"--seed", std::to_string(a->seed)}},
                         ps.world_comm);
    const bool rank0 = ps.world_rank == 0;
    DecodingModel model = open_for_decoding(a->load, ps, "generate");
    const ModelConfig& cfg = model.cfg;
    const Tokenizer* tok = model.tok.get();
    std::vector<int32_t> context = tok->tokenize(a->prompt);
    MT_CHECK(!context.empty(), "--prompt is empty; give at least one character");
    // A prompt longer than the context: condition on its end, which is what
    // the continuation follows (its beginning would be forgotten anyway).
    const size_t capacity = size_t(model.context());
    const bool truncated = context.size() > capacity;
    if (truncated) {
      if (rank0)
        std::fprintf(stderr, "generate: the prompt has %zu tokens, more than the model's context "
                     "of %zu; conditioning on its last %zu\n", context.size(), capacity, capacity);
      context.erase(context.begin(), context.end() - std::ptrdiff_t(capacity));
    }
    const int64_t positions =
        cache_positions(int64_t(context.size()), a->max_new_tokens, model.context());
    load_decoder(model, ps, positions,
                 "lower --max-new-tokens (" + std::to_string(a->max_new_tokens) + ") or shorten "
                 "--prompt (" + std::to_string(context.size()) + " tokens): the key/value cache "
                 "holds both, " + std::to_string(positions) + " positions; or pass "
                 "--skip-memory-check to try anyway",
                 a->skip_memory_check);
    GptDecoder& dec = *model.dec;
    const RngStream rng = RngStream::make(a->seed, "generate");
    std::vector<float> scratch;
    FILE* out = rank0 ? stdout : nullptr;  // every rank decodes; rank 0 prints
    if (out) std::fputs(a->prompt.c_str(), out);
    const float* logits = nullptr;
    for (int32_t t : context) logits = dec.step(t);
    StreamingDetokenizer stream(*tok);
    const std::vector<int32_t> prompt_tokens = context;
    std::vector<int32_t> generated;
    std::vector<double> log_probs;
    bool slid = false;  // the context window slid: log-probs condition on its second half only
    for (int64_t i = 0; i < a->max_new_tokens; ++i) {
      const int32_t next = sample_token(logits, cfg.vocab_size, a->sampling, rng, uint64_t(i), scratch);
      generated.push_back(next);
      log_probs.push_back(log_prob(logits, cfg.vocab_size, next));
      if (next == tok->eod()) break;
      if (out) {  // a character may span several tokens: print it when complete
        std::fputs(stream.push(next).c_str(), out);
        std::fflush(out);
      }
      context.push_back(next);
      if (dec.position() == dec.context()) {  // slide: keep the last half, re-encode it
        const size_t keep = size_t(dec.context() / 2);
        if (rank0 && !slid) {  // once: every later slide is the same
          std::fflush(stdout);  // on a terminal, after the text so far, on a line of its own
          std::fprintf(stderr, "%sgenerate: the context of %zu tokens is full; it restarts on "
                       "its last %zu tokens, and again each time it fills: from here on each "
                       "token conditions on the last %zu to %zu tokens only\n",
                       isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) ? "\n" : "", capacity,
                       keep, keep, capacity);
        }
        slid = true;
        dec.reset();
        for (size_t j = context.size() - keep; j < context.size(); ++j) logits = dec.step(context[j]);
      } else {
        logits = dec.step(next);
      }
    }
    if (out) std::fputs((stream.finish() + "\n").c_str(), out);
    if (rank0 && !a->output_json.empty()) {
      nlohmann::json j = {{"prompt", a->prompt},
                          {"prompt_tokens", prompt_tokens},
                          {"tokens", generated},
                          {"log_probs", log_probs},
                          {"text", tok->detokenize(generated)}};
      if (slid) j["context_slid"] = true;
      if (truncated) j["prompt_truncated"] = true;  // prompt_tokens: the part conditioned on
      // Byte tokens can end mid-character: invalid UTF-8 becomes U+FFFD, as printed.
      atomic_write_text(a->output_json,
                        j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
    return 0;
  };
}

}  // namespace mt
