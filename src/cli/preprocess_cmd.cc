// `megatron preprocess`: text (.txt / .jsonl) → Megatron .bin/.idx + vocabulary.
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "data/preprocess.h"

namespace mt {

Command add_preprocess_command(CLI::App& app) {
  auto o = std::make_shared<PreprocessOptions>();
  auto tokenizer = std::make_shared<std::string>("char");
  auto per_file = std::make_shared<bool>(false);
  app.add_option("--input", o->input, "a .txt (documents = blank-line-separated paragraphs) or "
                 ".jsonl file")->required();
  app.add_option("--output-prefix", o->output_prefix, "writes <prefix>_text_document.bin/.idx "
                 "and <prefix>_vocab.json")->required();
  app.add_option("--json-keys", o->json_keys, "JSON keys to read from each .jsonl line");
  app.add_option("--tokenizer-type", *tokenizer, "char (the only text tokenizer so far)");
  app.add_option("--vocab-file", o->vocab, "reuse this vocabulary instead of building one");
  app.add_flag("--append-eod", o->append_eod, "append the end-of-document token to each document");
  app.add_flag("--document-per-file", *per_file, ".txt: the whole file is one document");
  return [o, tokenizer, per_file]() {
    MT_CHECK(*tokenizer == "char", "--tokenizer-type '", *tokenizer,
             "' is not supported by preprocess yet; use char");
    o->whole_file_as_document = *per_file;
    Timer t;
    const PreprocessStats s = preprocess(*o);
    std::printf("preprocess: %lld documents, %lld tokens, vocabulary %lld (%s) in %.1f s\n",
                static_cast<long long>(s.documents), static_cast<long long>(s.tokens),
                static_cast<long long>(s.vocab_size), s.vocab_path.c_str(), t.seconds());
    for (const std::string& p : s.dataset_prefixes) std::printf("preprocess: wrote %s.bin/.idx\n", p.c_str());
    return 0;
  };
}

}  // namespace mt
