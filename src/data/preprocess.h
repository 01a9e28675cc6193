// `megatron preprocess`: text -> character vocabulary + Megatron indexed
// dataset, the counterpart of Megatron-LM's tools/preprocess_data.py for the
// character tokenizer.
//
// Input formats (chosen by extension, or by PreprocessOptions::format):
//   .txt   documents are the pieces of text.split("\n\n") with empty pieces
//          dropped (Python's str.split: non-overlapping, left to right, so
//          "a\n\n\nb" gives "a" and "\nb"), or the whole file as one
//          document with whole_file_as_document.
//   .jsonl one JSON object per line; each of json_keys (default "text") must be
//          a string. One dataset per key, as Megatron writes. An empty string
//          becomes a document with no sequence (as Megatron's builder
//          records it); blank lines are skipped.
// Outputs: <prefix>_<key>_document.bin/.idx (key "text" for .txt) and
// <prefix>_vocab.json. The vocabulary is the sorted distinct code points of
// the whole input (first streaming pass), plus "<|endoftext|>" last with
// append_eod, which also ends every non-empty document with the eod id
// (Megatron's --append-eod). Token dtype: uint16 when the vocabulary has fewer
// than 65500 entries, else int32 (Megatron's choice).
// Both passes stream the input; at most one document (or, for
// whole_file_as_document, one 1 MiB chunk) is held in memory at a time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct PreprocessOptions {
  std::string input;          // path of the .txt or .jsonl file
  std::string output_prefix;  // e.g. "data/shakespeare"
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;
  bool whole_file_as_document = false;  // .txt only
  std::string vocab;   // optional: tokenize with this vocab.json instead of building one
  std::string format;  // "" = by extension; else "txt" or "jsonl"
};

struct PreprocessStats {
  int64_t documents = 0;  // summed over keys
  int64_t sequences = 0;
  int64_t tokens = 0;
  int64_t input_bytes = 0;
  int64_t vocab_size = 0;
  int32_t eod = -1;
  std::string vocab_path;
  std::vector<std::string> dataset_prefixes;  // one per key
};

PreprocessStats preprocess(const PreprocessOptions& options);

}  // namespace mt
