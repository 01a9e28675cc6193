// The common tokenizer interface of megatron.cpp, with Megatron-LM's names
// (megatron/training/tokenizer/tokenizer.py): --tokenizer-type char,
// NullTokenizer, GPT2BPETokenizer, SentencePieceTokenizer, Llama2Tokenizer,
// HuggingFaceTokenizer (a tokenizer.json; data/hf_tokenizer.h).
//
// Used by `preprocess` (tokenize + eod), `train` (vocab_size + eod), and
// `generate` (tokenize the prompt, StreamingDetokenizer for the output). A
// checkpoint records describe(): the type, the files by path and SHA-256, the
// vocabulary size and special ids, so a later run can find and check them.
//
// One virtual call per document, not per token: dispatch happens at this
// boundary only (STYLE.md), the hot loops live in the implementations.
// All methods are const and safe to call from several threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Megatron's --tokenizer-type name, e.g. "GPT2BPETokenizer".
  virtual std::string type() const = 0;
  // Entries in the vocabulary (Megatron's tokenizer.vocab_size, before the
  // padding to a multiple of --make-vocab-size-divisible-by).
  virtual int64_t vocab_size() const = 0;
  // End-of-document id (Megatron's tokenizer.eod), -1 when there is none.
  virtual int32_t eod() const = 0;
  // Beginning-of-sequence id, -1 when there is none.
  virtual int32_t bos() const { return -1; }

  // Appends Megatron's tokenizer.tokenize(text) to `out` (Llama2Tokenizer:
  // [bos] + ids). Invalid UTF-8 is an error naming the byte offset in `text`.
  virtual void tokenize_append(std::string_view text, std::vector<int32_t>& out) const = 0;
  std::vector<int32_t> tokenize(std::string_view text) const;
  // Megatron's tokenizer.detokenize(ids). An id outside the vocabulary is an
  // error naming it.
  virtual std::string detokenize(std::span<const int32_t> ids) const = 0;

  // Byte-level tokenizers (GPT-2) append the raw bytes of token `id` (possibly
  // part of a UTF-8 character) and return true; others return false and
  // StreamingDetokenizer re-decodes instead.
  virtual bool append_token_bytes(int32_t id, std::string& out) const { return false; }

  // {"type": ..., "vocab_size": ..., "eod": ..., "bos": ..., plus the files as
  // {"<role>": {"path": ..., "sha256": ...}}}: what a checkpoint records.
  virtual nlohmann::json describe() const;
};

// Everything make_tokenizer may need, with Megatron's flag names.
struct TokenizerOptions {
  std::string type = "char";     // --tokenizer-type
  std::string vocab_file;        // --vocab-file (GPT-2 vocab.json; char: <prefix>_vocab.json)
  std::string merge_file;        // --merge-file (GPT-2 merges.txt)
  std::string tokenizer_model;   // --tokenizer-model (SentencePiece .model; HuggingFaceTokenizer: the folder of tokenizer.json)
  int64_t vocab_size = 0;        // --vocab-size (NullTokenizer)
};

// The tokenizer types make_tokenizer knows, for help texts and messages.
const std::vector<std::string>& tokenizer_types();
// Builds the tokenizer; every missing flag or unreadable file is an error
// naming it (and the flag that fixes it).
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);
class CharTokenizer;
// The char tokenizer of a vocabulary already in memory (a checkpoint's meta.json).
std::unique_ptr<Tokenizer> make_char_tokenizer(CharTokenizer tok);

// Turns ids into text one id at a time, for printing generated text as it
// comes: push() returns the text that is complete so far, holding back the
// bytes of a character that spans several tokens; finish() returns the rest.
// The concatenation of all returned strings equals detokenize(all ids).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer& tok_;
  std::string pending_;          // byte-level: bytes not yet decoded
  std::vector<int32_t> ids_;     // others: every id so far
  std::string emitted_;          // others: the text returned so far
};

}  // namespace mt
