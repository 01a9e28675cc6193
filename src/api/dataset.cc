// megatron::Preprocessor (include/megatron/dataset.h): `megatron
// preprocess`'s flags (declared here: no other command has them) parsed from
// a flag list, or the caller's PreprocessOptions, run as data/preprocess.h's
// preprocess(). The binary's `preprocess` (cli/preprocess_cmd.cc) is a client
// of it.
#include "megatron/dataset.h"

#include <cstdio>
#include <stdexcept>
#include <utility>

#include <CLI/CLI.hpp>

#include "api/job_errors.h"
#include "comm/mpi_env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/output_guard.h"
#include "data/preprocess.h"
#include "data/tokenizer.h"
#include "flags/command_words.h"
#include "flags/strict_numbers.h"

namespace megatron {

namespace {

constexpr const char* kAbout = "tokenize text into a Megatron .bin/.idx dataset";

mt::PreprocessOptions internal(const PreprocessOptions& o) {
  mt::PreprocessOptions p;
  p.input = o.input;
  p.output_prefix = o.output_prefix;
  p.json_keys = o.json_keys;
  p.append_eod = o.append_eod;
  p.whole_file_as_document = o.document_per_file;
  p.vocab = o.vocab_file;
  p.format = o.format;
  p.tokenizer_type = o.tokenizer_type;
  p.merge_file = o.merge_file;
  p.tokenizer_model = o.tokenizer_model;
  p.null_vocab_size = o.vocab_size;
  p.workers = o.workers;
  p.overwrite = o.overwrite;
  p.progress = o.progress;
  return p;
}


}  // namespace

struct Preprocessor::Impl {
  PreprocessOptions options;
};

Preprocessor::Preprocessor(PreprocessOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.input.empty()) throw std::invalid_argument("megatron::Preprocessor: no input file");
  if (options.output_prefix.empty())
    throw std::invalid_argument("megatron::Preprocessor: no output prefix");
  if (options.workers < 1 || options.workers > 1024)
    throw std::invalid_argument("megatron::Preprocessor: workers " +
                                std::to_string(options.workers) + " is not in 1..1024");
  impl_->options = std::move(options);
}

Preprocessor::Preprocessor(const std::vector<std::string>& flags)
    : impl_(std::make_unique<Impl>()) {
  PreprocessOptions& o = impl_->options;
  std::string types;
  for (const std::string& t : mt::tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  CLI::App app{"megatron.cpp as a library: megatron preprocess"};
  app.require_subcommand(1);
  CLI::App& cmd = *app.add_subcommand("preprocess", kAbout);
  cmd.add_option("--input", o.input, "a .jsonl file (one JSON object per line) or a .txt file "
                 "(documents = blank-line-separated paragraphs)")->required();
  cmd.add_option("--output-prefix", o.output_prefix, "writes <prefix>_<key>_document.bin/.idx "
                 "(key \"text\" for .txt), and <prefix>_vocab.json (char) or "
                 "<prefix>_tokenizer.json (others)")->required();
  cmd.add_option("--json-keys", o.json_keys, "JSON keys to read from each .jsonl line; one "
                 "dataset per key (default: text)");
  cmd.add_option("--tokenizer-type", o.tokenizer_type, "one of: " + types + " (default char: "
                 "character vocabulary built from the input)");
  cmd.add_option("--vocab-file", o.vocab_file, "GPT2BPETokenizer: GPT-2's vocab.json; char: reuse "
                 "this vocabulary instead of building one");
  cmd.add_option("--merge-file", o.merge_file, "GPT2BPETokenizer: GPT-2's merges.txt");
  cmd.add_option("--tokenizer-model", o.tokenizer_model,
                 "SentencePieceTokenizer / Llama2Tokenizer: the SentencePiece .model file; "
                 "HuggingFaceTokenizer: the folder holding tokenizer.json");
  cmd.add_option("--vocab-size", o.vocab_size, "NullTokenizer: ids are in [0, N), eod is N");
  cmd.add_option("--workers", o.workers, "tokenizer threads (output is identical for any number)")
      ->check(CLI::Range(1, 1024));
  cmd.add_flag("--append-eod", o.append_eod, "append the end-of-document token to each document");
  cmd.add_flag("--document-per-file", o.document_per_file,
               ".txt: the whole file is one document");
  cmd.add_flag("--overwrite", o.overwrite,
               "replace an existing dataset of this --output-prefix (without it, an error); the "
               "new files are written beside the old and renamed in when complete, so a run "
               "reading the old ones keeps their data");
  mt::make_integer_options_strict(cmd);
  mt::parse_command_words(app, cmd, flags);
}

Preprocessor::~Preprocessor() = default;

const PreprocessOptions& Preprocessor::options() const { return impl_->options; }

std::vector<std::string> Preprocessor::outputs() const {
  return mt::preprocess_outputs(internal(impl_->options));
}

PreprocessSummary Preprocessor::preprocess() {
  const mt::PreprocessOptions o = internal(impl_->options);
  return mt::ending_job_on_error([&] {
    // Before anything is written: no output may replace an input
    // (core/output_guard.h), --overwrite or not.
    mt::OutputGuard paths;
    paths.reads_file("--input", o.input);
    paths.reads_file("--vocab-file", o.vocab);
    paths.reads_file("--merge-file", o.merge_file);
    paths.reads_file_or_dir("--tokenizer-model", o.tokenizer_model);
    for (const std::string& f : mt::preprocess_outputs(o)) paths.writes_file("--output-prefix", f);
    paths.check();
    mt::Timer t;
    const mt::PreprocessStats s = mt::preprocess(o);
    PreprocessSummary r;
    r.seconds = t.seconds();
    r.documents = s.documents;
    r.sequences = s.sequences;
    r.tokens = s.tokens;
    r.input_bytes = s.input_bytes;
    r.vocab_size = s.vocab_size;
    r.eod = s.eod;
    r.vocab_path = s.vocab_path;
    r.tokenizer_path = s.tokenizer_path;
    r.dataset_prefixes = s.dataset_prefixes;
    return r;
  });
}

int Preprocessor::run() {
  impl_->options.progress = true;
  const PreprocessSummary s = preprocess();
  std::printf("preprocess: %lld documents, %lld tokens, vocabulary %lld (%s) in %.1f s, "
              "%.1f MB/s\n",
              static_cast<long long>(s.documents), static_cast<long long>(s.tokens),
              static_cast<long long>(s.vocab_size),
              (s.vocab_path.empty() ? s.tokenizer_path : s.vocab_path).c_str(), s.seconds,
              s.seconds > 0 ? double(s.input_bytes) / 1e6 / s.seconds : 0.0);
  for (const std::string& p : s.dataset_prefixes)
    std::printf("preprocess: wrote %s.bin/.idx\n", p.c_str());
  return 0;
}

}  // namespace megatron
