// Character-level tokenizer over Unicode code points (nanoGPT's
// shakespeare_char, generalised to UTF-8), and Megatron's NullTokenizer.
//
// CharTokenizer: the vocabulary is the sorted list of distinct code points of
// the training text; id = position in that list. Optionally the end-of-document
// token "<|endoftext|>" is appended as the last id. The vocabulary file is a
// JSON array of one-character strings (plus "<|endoftext|>" last, if present),
// written exactly as Python's json.dumps(list) writes it, e.g.
//   ["\n", " ", "!", ..., "z"]
// An unknown character is an error (naming it and its byte offset), never a
// silent fallback id: a model must not train on text it cannot represent.
// The literal text "<|endoftext|>" is not special to tokenize(); the eod id is
// only added by the preprocessor (--append-eod).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mt {

// Appends the code points of `text` to `out`. Strict UTF-8 (no overlongs,
// surrogates or values > U+10FFFF); on an invalid or truncated sequence throws
// mt::Error naming the byte offset (base_offset + offset in text) and `source`.
void utf8_decode(std::string_view text, std::vector<char32_t>& out, int64_t base_offset = 0,
                 std::string_view source = "input");
// Appends the UTF-8 encoding of `cp` to `out` (cp must be a valid scalar).
void utf8_append(char32_t cp, std::string& out);
// Length of the longest prefix of `text` that does not end inside a multi-byte
// character (for decoding a stream in chunks). Invalid bytes count as complete
// so that utf8_decode reports them.
size_t utf8_complete_prefix(std::string_view text);
// "U+00E9 'é'" (or just "U+000A" for control characters), for messages.
std::string describe_code_point(char32_t cp);

class CharTokenizer {
 public:
  static constexpr std::string_view kEodToken = "<|endoftext|>";

  CharTokenizer() = default;
  // Vocabulary = sorted distinct `code_points` (duplicates allowed in input),
  // then the eod token if with_eod.
  static CharTokenizer from_code_points(std::vector<char32_t> code_points, bool with_eod);
  static CharTokenizer from_text(std::string_view text, bool with_eod);
  // Parses / reads the JSON array described above; `source` names it in errors.
  static CharTokenizer from_json(std::string_view json, std::string_view source);
  static CharTokenizer load(const std::string& path);
  // The JSON text as Python's json.dumps writes it (ASCII only, \uXXXX escapes).
  std::string to_json() const;
  // Writes to_json() to `path` (via a temp file and rename).
  void save(const std::string& path) const;

  std::vector<int32_t> tokenize(std::string_view text) const;
  // Appends the ids of `text` to `out`; errors name byte base_offset + offset.
  void tokenize_append(std::string_view text, std::vector<int32_t>& out,
                       int64_t base_offset = 0) const;
  std::string detokenize(std::span<const int32_t> ids) const;

  int64_t vocab_size() const { return int64_t(chars_.size()) + (has_eod_ ? 1 : 0); }
  // Id of "<|endoftext|>", or -1 when the vocabulary has none.
  int32_t eod() const { return has_eod_ ? int32_t(chars_.size()) : -1; }
  // Code point of each non-eod id.
  const std::vector<char32_t>& code_points() const { return chars_; }
  // Id of `cp`, or -1 when it is not in the vocabulary.
  int32_t id_of(char32_t cp) const;

 private:
  void build_lookup();

  std::vector<char32_t> chars_;                     // id -> code point
  std::vector<std::pair<char32_t, int32_t>> sorted_;  // (code point, id), by code point
  int32_t ascii_[128];                              // fast path: id of ASCII cp, or -1
  bool has_eod_ = false;
};

// Megatron's `--tokenizer-type NullTokenizer --vocab-size N`
// (megatron/training/tokenizer/tokenizer.py, class _NullTokenizer): the data
// already holds ids, used as-is. Its vocab_size is N + 1 and its eod id is N
// (one extra id past the given size, reserved for end of document); tokenize
// parses space-separated integers and detokenize joins ids with spaces.
class NullTokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size_without_eod);
  int64_t vocab_size() const { return n_ + 1; }
  int32_t eod() const { return int32_t(n_); }
  std::vector<int32_t> tokenize(std::string_view text) const;
  std::string detokenize(std::span<const int32_t> ids) const;

 private:
  int64_t n_;
};

}  // namespace mt
