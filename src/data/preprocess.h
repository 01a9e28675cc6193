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
// Outputs: <prefix>_<key>_document.bin/.idx (key "text" for .txt),
// <prefix>_vocab.json and <prefix>_tokenizer.json (its SHA-256, as for the
// other tokenizers; written last). The vocabulary is the sorted distinct code points of
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
  std::string vocab;   // --vocab-file: char: reuse this vocab.json instead of building
                       // one; GPT2BPETokenizer: GPT-2's vocab.json
  std::string format;  // "" = by extension; else "txt" or "jsonl"

  // Megatron's --tokenizer-type: "char" (vocabulary built from the input, the
  // path described above), or a fixed vocabulary: "GPT2BPETokenizer" (vocab +
  // merge_file), "SentencePieceTokenizer" / "Llama2Tokenizer"
  // (tokenizer_model), "NullTokenizer" (null_vocab_size; texts of ids).
  std::string tokenizer_type = "char";
  std::string merge_file;       // --merge-file
  std::string tokenizer_model;  // --tokenizer-model
  int64_t null_vocab_size = 0;  // --vocab-size
  int workers = 1;              // --workers: tokenizer threads (fixed vocabularies)
  // --overwrite: replace an existing dataset of the same prefix (without it,
  // an error). Either way the new files are written beside the old ones and
  // renamed in: a run that has the old ones open keeps reading their data.
  bool overwrite = false;
  // Progress on stderr for inputs that take more than a few seconds: a line
  // rewritten in place on a terminal, else a plain line every 30 s.
  bool progress = false;
};
// Fixed-vocabulary tokenizers: the JSONL rules are Megatron's
// (tools/preprocess_data.py): a key's value may also be a list of strings
// (sentences: one sequence each, empty ones dropped); --append-eod adds eod to
// a non-empty document; Llama2Tokenizer makes every text [bos] + ids (an empty
// text gives [bos]). Megatron reads its input in strict UTF-8 and stops on
// invalid bytes; so does this (the error names file, line and byte offset).
// errors="replace" only applies to decoding (Tokenizer::detokenize).
// Besides the datasets, <prefix>_tokenizer.json records the tokenizer
// (Tokenizer::describe(): type, files and their SHA-256).

struct PreprocessStats {
  int64_t documents = 0;  // summed over keys
  int64_t sequences = 0;
  int64_t tokens = 0;
  int64_t input_bytes = 0;
  int64_t vocab_size = 0;
  int32_t eod = -1;
  std::string vocab_path;      // char: the vocabulary written
  std::string tokenizer_path;  // <prefix>_tokenizer.json
  std::vector<std::string> dataset_prefixes;  // one per key
};

// Every file preprocess(options) writes: each key's .bin/.idx, the char
// vocabulary (char only) and the tokenizer record.
std::vector<std::string> preprocess_outputs(const PreprocessOptions& options);

PreprocessStats preprocess(const PreprocessOptions& options);

}  // namespace mt
