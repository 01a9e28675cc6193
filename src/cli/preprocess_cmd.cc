// `megatron preprocess`: text (.txt / .jsonl) → Megatron .bin/.idx, with
// Megatron-LM's tools/preprocess_data.py flags.
#include <cstdio>

#include "cli/commands.h"
#include "flags/strict_numbers.h"
#include "core/error.h"
#include "core/log.h"
#include "core/output_guard.h"
#include "data/preprocess.h"
#include "data/tokenizer.h"

namespace mt {

Command add_preprocess_command(CLI::App& app) {
  auto o = std::make_shared<PreprocessOptions>();
  auto per_file = std::make_shared<bool>(false);
  std::string types;
  for (const std::string& t : tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  app.add_option("--input", o->input, "a .jsonl file (one JSON object per line) or a .txt file "
                 "(documents = blank-line-separated paragraphs)")->required();
  app.add_option("--output-prefix", o->output_prefix, "writes <prefix>_<key>_document.bin/.idx "
                 "(key \"text\" for .txt), and <prefix>_vocab.json (char) or "
                 "<prefix>_tokenizer.json (others)")->required();
  app.add_option("--json-keys", o->json_keys, "JSON keys to read from each .jsonl line; one "
                 "dataset per key (default: text)");
  app.add_option("--tokenizer-type", o->tokenizer_type, "one of: " + types + " (default char: "
                 "character vocabulary built from the input)");
  app.add_option("--vocab-file", o->vocab, "GPT2BPETokenizer: GPT-2's vocab.json; char: reuse "
                 "this vocabulary instead of building one");
  app.add_option("--merge-file", o->merge_file, "GPT2BPETokenizer: GPT-2's merges.txt");
  app.add_option("--tokenizer-model", o->tokenizer_model,
                 "SentencePieceTokenizer / Llama2Tokenizer: the SentencePiece .model file; "
                 "HuggingFaceTokenizer: the folder holding tokenizer.json");
  app.add_option("--vocab-size", o->null_vocab_size, "NullTokenizer: ids are in [0, N), eod is N");
  app.add_option("--workers", o->workers, "tokenizer threads (output is identical for any number)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--append-eod", o->append_eod, "append the end-of-document token to each document");
  app.add_flag("--document-per-file", *per_file, ".txt: the whole file is one document");
  app.add_flag("--overwrite", o->overwrite,
               "replace an existing dataset of this --output-prefix (without it, an error); the "
               "new files are written beside the old and renamed in when complete, so a run "
               "reading the old ones keeps their data");
  make_integer_options_strict(app);
  return [o, per_file]() {
    o->whole_file_as_document = *per_file;
    // Before anything is written: no output may replace an input
    // (core/output_guard.h), --overwrite or not.
    OutputGuard paths;
    paths.reads_file("--input", o->input);
    paths.reads_file("--vocab-file", o->vocab);
    paths.reads_file("--merge-file", o->merge_file);
    paths.reads_file_or_dir("--tokenizer-model", o->tokenizer_model);
    for (const std::string& f : preprocess_outputs(*o)) paths.writes_file("--output-prefix", f);
    paths.check();
    o->progress = true;
    Timer t;
    const PreprocessStats s = preprocess(*o);
    const double secs = t.seconds();
    std::printf("preprocess: %lld documents, %lld tokens, vocabulary %lld (%s) in %.1f s, "
                "%.1f MB/s\n",
                static_cast<long long>(s.documents), static_cast<long long>(s.tokens),
                static_cast<long long>(s.vocab_size),
                (s.vocab_path.empty() ? s.tokenizer_path : s.vocab_path).c_str(), secs,
                secs > 0 ? double(s.input_bytes) / 1e6 / secs : 0.0);
    for (const std::string& p : s.dataset_prefixes) std::printf("preprocess: wrote %s.bin/.idx\n", p.c_str());
    return 0;
  };
}

}  // namespace mt
