// megatron/dataset.h — `megatron preprocess` as a library call: text (.txt or
// .jsonl) tokenized into Megatron's indexed dataset (.bin/.idx), the
// counterpart of Megatron-LM's tools/preprocess_data.py, for a Trainer's
// --data-path.
//
//   .txt   documents are the blank-line-separated paragraphs (Python's
//          text.split("\n\n"), empty pieces dropped), or the whole file with
//          document_per_file.
//   .jsonl one JSON object per line; each of json_keys a string (or a list of
//          strings: one sequence each); one dataset per key.
// Writes <output_prefix>_<key>_document.bin/.idx (key "text" for .txt),
// <output_prefix>_vocab.json (tokenizer "char": the sorted code points of the
// input, "<|endoftext|>" last with append_eod) and
// <output_prefix>_tokenizer.json (the tokenizer: type, files and their
// SHA-256), each written beside an old one and renamed in when complete. The
// output for any number of workers is the same. No MPI.
//
//   megatron::PreprocessOptions o;
//   o.input = "corpus.jsonl";
//   o.output_prefix = "data/corpus";
//   o.tokenizer_type = "GPT2BPETokenizer";
//   o.vocab_file = "gpt2-vocab.json";
//   o.merge_file = "gpt2-merges.txt";
//   o.append_eod = true;
//   const megatron::PreprocessSummary s = megatron::Preprocessor(o).preprocess();
//   // s.dataset_prefixes[0] + ".bin/.idx": s.documents documents, s.tokens tokens
//
// Or with `megatron preprocess`'s words (Megatron-LM's flags, --config FILE):
//   megatron::Preprocessor({"--input", "corpus.txt", "--output-prefix", "data/c"}).run();
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "megatron/flags.h"

namespace megatron {

struct PreprocessOptions {
  std::string input;          // --input: the .txt or .jsonl file
  std::string output_prefix;  // --output-prefix, e.g. "data/shakespeare"
  std::string format;         // "" = by the input's extension; else "txt" or "jsonl"
  std::vector<std::string> json_keys{"text"};  // --json-keys (.jsonl)
  // --tokenizer-type: "char" (a vocabulary built from the input),
  // "GPT2BPETokenizer" (vocab_file + merge_file), "SentencePieceTokenizer" /
  // "Llama2Tokenizer" (tokenizer_model: the .model file), "HuggingFaceTokenizer"
  // (tokenizer_model: the folder of tokenizer.json), "NullTokenizer" (texts of
  // ids below vocab_size).
  std::string tokenizer_type = "char";
  std::string vocab_file;       // --vocab-file (GPT-2's vocab.json; char: reuse this vocabulary)
  std::string merge_file;       // --merge-file (GPT-2's merges.txt)
  std::string tokenizer_model;  // --tokenizer-model
  int64_t vocab_size = 0;       // --vocab-size (NullTokenizer: ids in [0, N), eod N)
  int workers = 1;              // --workers: tokenizer threads, 1 to 1024
  bool append_eod = false;         // --append-eod: end each non-empty document with eod
  bool document_per_file = false;  // --document-per-file: a .txt is one document
  bool overwrite = false;          // --overwrite: replace a dataset of this prefix
  // Progress on stderr for inputs that take more than a few seconds (the
  // command's run() shows it).
  bool progress = false;
};

// What preprocess() wrote.
struct PreprocessSummary {
  int64_t documents = 0;  // summed over the keys
  int64_t sequences = 0;
  int64_t tokens = 0;
  int64_t input_bytes = 0;
  int64_t vocab_size = 0;                     // the tokenizer's
  int32_t eod = -1;                           // the eod id appended (-1: no append_eod)
  std::string vocab_path;                     // char: the vocabulary written
  std::string tokenizer_path;                 // <prefix>_tokenizer.json
  std::vector<std::string> dataset_prefixes;  // one per key: PREFIX.bin / PREFIX.idx
  double seconds = 0;                         // the time it took
};

class Preprocessor {
 public:
  // A run as `options` say. Throws std::invalid_argument for an empty input
  // or output prefix, or workers outside 1..1024.
  explicit Preprocessor(PreprocessOptions options);
  // `flags`: the words after `megatron preprocess`. Throws FlagError
  // (FlagHelp for --help), as the binary refuses them.
  explicit Preprocessor(const std::vector<std::string>& flags);
  // The same for a list written out, Preprocessor({"--help"}) (which the options
  // would otherwise take too).
  explicit Preprocessor(std::initializer_list<std::string> flags)
      : Preprocessor(std::vector<std::string>(flags)) {}
  ~Preprocessor();
  Preprocessor(const Preprocessor&) = delete;
  Preprocessor& operator=(const Preprocessor&) = delete;

  const PreprocessOptions& options() const;
  // Every file preprocess() writes: each key's .bin and .idx, the char
  // vocabulary (char only) and the tokenizer record.
  std::vector<std::string> outputs() const;

  // Tokenizes and writes the datasets; returns what was written. Any error
  // ends the job as the binary does (one line on stderr, exit 1): an output
  // that would replace an input, an existing dataset without overwrite, an
  // unreadable file, invalid UTF-8 or JSON (named by file, line and byte).
  PreprocessSummary preprocess();
  // `megatron preprocess`: preprocess() with progress, then its summary lines
  // on stdout; returns what the command exits with (0).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
