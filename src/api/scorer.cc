// megatron::Scorer (include/megatron/scoring.h): `megatron score` as a library
// call. Its flags (declared here, parsed by flags/command_words.h), the
// documents of --input (api/score_input.h), the checkpoint loaded for decoding
// (decoding/decoding_model.h) with a cache of the longest window, and each
// document's windows through the single-sequence decoder. The binary's
// `score` (cli/score_cmd.cc) is a client of it.
#include "megatron/scoring.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "api/score_input.h"
#include "args/run_args_check.h"
#include "checkpoint/atomic_file.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "api/job_errors.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "decoding/decoding_model.h"
#include "flags/command_words.h"
#include "flags/strict_numbers.h"
#include "model/sampling.h"

namespace megatron {

namespace {

// The flags the binary's `score` binds.
struct ScoreFlags {
  ScoreOptions o;
  mt::DecodingLayout layout;
  std::string output_json;
  bool log_probs = false;
};

void add_score_flags(CLI::App& app, ScoreFlags& f) {
  ScoreOptions& o = f.o;
  app.add_option("--load", o.load, "checkpoint directory (a --save of megatron train)")->required();
  app.add_option("--input", o.input, ".txt (documents separated by blank lines) or .jsonl")
      ->required();
  app.add_option("--json-keys", o.json_key, "JSONL: the key holding each document's text");
  app.add_flag("--append-eod", o.append_eod,
               "end every document with the end-of-document token (and score it), as "
               "preprocess --append-eod wrote the training data; refused when the checkpoint's "
               "tokenizer has none");
  app.add_option("--output-json", f.output_json,
                 "write the JSON lines here instead of stdout (one per document, then a total)");
  app.add_flag("--log-probs", f.log_probs,
               "also write each document's token ids and every predicted token's log-probability");
  mt::add_decoding_layout_options(app, f.layout,
                                  "TP size to score with (launch that many ranks with mpirun)");
  app.add_flag("--skip-memory-check", o.skip_memory_check,
               "allocate even if weights and key/value cache exceed the host's available memory");
  app.footer(
      "Output: one JSON line per document, {\"document\", \"tokens\" (predicted), \"loss\" (mean\n"
      "  negative log-likelihood, nats), \"ppl\", \"sum_log_prob\"[, \"ids\", \"log_probs\"]}, then\n"
      "  {\"total\": {\"documents\", \"tokens\", \"loss\", \"ppl\"}} over all predicted tokens.\n"
      "  A document longer than the model's context (--max-position-embeddings, by default\n"
      "  --seq-length) is scored in windows of that many predictions, each starting from the\n"
      "  previous window's last token (as Megatron's samples overlap by one token); a document\n"
      "  of fewer than 2 tokens has none to score. The key/value cache holds the longest\n"
      "  window; its size is said on stderr, and one that does not fit the host's available\n"
      "  memory is refused before anything is allocated. An --input that is a directory, empty\n"
      "  or only blank lines is an error, and so is an --output-json that is the --input.");
  mt::make_integer_options_strict(app);
}


// FNV-1a over the documents and their lengths: the same on every rank iff
// (barring a collision) the documents are.
std::string documents_digest(const std::vector<std::string>& docs) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  for (const std::string& d : docs) {
    const uint64_t n = d.size();
    mix(&n, sizeof n);
    mix(d.data(), d.size());
  }
  return std::to_string(docs.size()) + " documents, digest " + std::to_string(h);
}

// Windows of the model's context, each starting from the previous one's last token.
DocumentScore score_document(mt::DecodingModel& m, std::vector<int32_t> ids) {
  DocumentScore s;
  const int64_t n = int64_t(ids.size()), window = m.context();
  for (int64_t start = 0; start + 1 < n; start += window) {
    m.dec->reset();
    const int64_t end = std::min(n - 1, start + window);  // predicts ids[start+1 .. end]
    for (int64_t i = start; i < end; ++i) {
      const float* logits = m.dec->step(ids[size_t(i)]);
      const double lp = mt::log_prob(logits, m.cfg.vocab_size, ids[size_t(i + 1)]);
      s.log_probs.push_back(lp);
      s.sum_log_prob += lp;
      ++s.tokens;
    }
  }
  s.ids = std::move(ids);
  s.loss = s.tokens > 0 ? -s.sum_log_prob / double(s.tokens)
                        : std::numeric_limits<double>::quiet_NaN();
  s.ppl = std::exp(s.loss);
  return s;
}

}  // namespace

struct Scorer::Impl {
  ScoreOptions options;
  std::string output_json;
  bool log_probs = false;
  bool used = false;
  // Declared first: MPI outlives the model's communicators.
  std::unique_ptr<mt::MpiEnv> mpi;
  std::unique_ptr<mt::ParallelState> ps;

  void start(const char* call);
  // Collective: the layout, then the same arguments on every rank.
  void connect(const mt::ArgList& same);
  Scores score(const std::vector<std::string>& docs);
};

void Scorer::Impl::start(const char* call) {
  if (used) throw std::logic_error(std::string("megatron::Scorer::") + call + " after a score");
  used = true;
}

void Scorer::Impl::connect(const mt::ArgList& same) {
  mpi = std::make_unique<mt::MpiEnv>();
  mt::DecodingLayout layout;
  layout.tp = options.tensor_parallel;
  layout.ep = options.expert_parallel;
  ps = std::make_unique<mt::ParallelState>(
      mt::decoding_parallel_config(layout, mpi->world_size(), "score"));
  // Every rank decodes the same documents (args/run_args_check.h).
  mt::check_same_arguments(same, ps->world_comm);
}

// Collective: the checkpoint, a cache of the longest window, every document.
Scores Scorer::Impl::score(const std::vector<std::string>& docs) {
  const ScoreOptions& o = options;
  mt::DecodingModel model = mt::open_for_decoding(o.load, *ps, "score");
  MT_CHECK(!o.append_eod || model.tok->eod() >= 0, "--append-eod: the checkpoint's ",
           model.tok->type(), " tokenizer has no end-of-document token (a char vocabulary has "
           "one only when preprocess built it with --append-eod), so its training data had none "
           "either; fix: score without --append-eod");
  std::vector<std::vector<int32_t>> ids(docs.size());
  size_t longest = 0;  // the document of most tokens
  for (size_t d = 0; d < docs.size(); ++d) {
    ids[d] = model.tok->tokenize(docs[d]);
    if (o.append_eod) ids[d].push_back(model.tok->eod());
    if (ids[d].size() > ids[longest].size()) longest = d;
  }
  // The cache holds the longest window: its predictions, at most the context.
  const int64_t n_longest = ids.empty() ? 0 : int64_t(ids[longest].size());
  const int64_t positions = std::clamp<int64_t>(n_longest - 1, 1, model.context());
  mt::load_decoder(model, *ps, positions,
                   "shorten the longest document (document " + std::to_string(longest) + ", " +
                       std::to_string(n_longest) + " tokens: the key/value cache holds " +
                       std::to_string(positions) + " positions), or pass --skip-memory-check to "
                       "try anyway",
                   o.skip_memory_check);
  Scores r;
  for (size_t d = 0; d < docs.size(); ++d) {
    r.documents.push_back(score_document(model, std::move(ids[d])));
    r.tokens += r.documents.back().tokens;
    r.sum_log_prob += r.documents.back().sum_log_prob;
  }
  r.loss = r.tokens > 0 ? -r.sum_log_prob / double(r.tokens)
                        : std::numeric_limits<double>::quiet_NaN();
  r.ppl = std::exp(r.loss);
  return r;
}

Scorer::Scorer(const ScoreOptions& options) : impl_(std::make_unique<Impl>()) {
  if (options.load.empty())
    throw std::invalid_argument("ScoreOptions::load: the checkpoint directory is empty");
  impl_->options = options;
}

Scorer::Scorer(const std::vector<std::string>& flags) : impl_(std::make_unique<Impl>()) {
  CLI::App app{"megatron.cpp as a library: megatron score"};
  app.require_subcommand(1);
  CLI::App* score = app.add_subcommand(
      "score", "the loss of a checkpoint on a text or JSONL file, per document (no training)");
  ScoreFlags f;
  add_score_flags(*score, f);
  mt::parse_command_words(app, *score, flags);
  f.o.tensor_parallel = f.layout.tp;
  f.o.expert_parallel = f.layout.ep;
  impl_->options = f.o;
  impl_->output_json = f.output_json;
  impl_->log_probs = f.log_probs;
}

Scorer::~Scorer() = default;

const ScoreOptions& Scorer::options() const { return impl_->options; }

Scores Scorer::score() {
  Impl& s = *impl_;
  s.start("score()");
  if (s.options.input.empty())
    throw std::invalid_argument("ScoreOptions::input: no file to score; give one, or call "
                                "score(documents)");
  return mt::ending_job_on_error([&] {
    const ScoreOptions& o = s.options;
    s.connect({{"--load", o.load},
               {"--input", o.input},
               {"--json-keys", o.json_key},
               {"--append-eod", o.append_eod ? "true" : "false"}});
    return s.score(mt::read_score_documents(o.input, o.json_key));
  });
}

Scores Scorer::score(const std::vector<std::string>& documents) {
  Impl& s = *impl_;
  s.start("score(documents)");
  return mt::ending_job_on_error([&] {
    s.connect({{"--load", s.options.load},
               {"--append-eod", s.options.append_eod ? "true" : "false"},
               {"documents", documents_digest(documents)}});
    return s.score(documents);
  });
}

int Scorer::run() {
  Impl& s = *impl_;
  const ScoreOptions& o = s.options;
  // Before anything is read or written: --output-json must not replace the
  // --input text or a file of the --load checkpoint (core/output_guard.h: by
  // path, link or inode, or inside the checkpoint's folders).
  mt::ending_job_on_error([&] {
    mt::OutputGuard g;
    g.reads_dir("--load", o.load, mt::OutputGuard::checkpoint_names());
    g.reads_file("--input", o.input);
    g.writes_file("--output-json", s.output_json);
    g.check();
  });
  const Scores r = score();
  return mt::ending_job_on_error([&] {
    std::string out;
    for (size_t d = 0; d < r.documents.size(); ++d) {
      const DocumentScore& ds = r.documents[d];
      nlohmann::json j = {{"document", d}, {"tokens", ds.tokens},
                          {"sum_log_prob", ds.sum_log_prob}};
      if (ds.tokens > 0) {
        j["loss"] = ds.loss;
        j["ppl"] = ds.ppl;
      }
      if (s.log_probs) {
        j["ids"] = ds.ids;
        j["log_probs"] = ds.log_probs;
      }
      out += j.dump() + "\n";
    }
    nlohmann::json total = {{"documents", r.documents.size()}, {"tokens", r.tokens}};
    if (r.tokens > 0) {
      total["loss"] = r.loss;
      total["ppl"] = r.ppl;
    }
    out += nlohmann::json{{"total", total}}.dump() + "\n";
    if (s.ps->world_rank != 0) return 0;
    if (s.output_json.empty())
      std::fputs(out.c_str(), stdout);
    else
      mt::atomic_write_text(s.output_json, out);
    if (r.tokens == 0)  // not a loss of 0: there was nothing to predict
      std::fprintf(stderr, "score: %zu documents, no token scored (each has fewer than 2 "
                   "tokens)\n", r.documents.size());
    else
      std::fprintf(stderr, "score: %zu documents, %lld tokens scored, loss %.6f, ppl %.4f\n",
                   r.documents.size(), static_cast<long long>(r.tokens), r.loss, r.ppl);
    return 0;
  });
}

}  // namespace megatron
