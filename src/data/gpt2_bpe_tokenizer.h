// GPT-2's byte-level BPE, id for id as OpenAI's encoder.py and Megatron-LM's
// gpt2_tokenization.py (the `_GPT2BPETokenizer` of --tokenizer-type
// GPT2BPETokenizer):
//   1. pre-tokenise with the regex
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (here a hand-written scanner over code points, no regex engine);
//   2. map each piece's UTF-8 bytes through the byte-to-unicode table (only to
//      read vocab.json / merges.txt: internally symbols are byte strings);
//   3. merge adjacent symbols by rank (line order of merges.txt), always the
//      lowest-ranked pair present, every occurrence left to right, until no
//      pair is a merge; look the symbols up in vocab.json.
// "<|endoftext|>" (50256) is eod; like Megatron (special_tokens=[]) the text
// "<|endoftext|>" inside a document is ordinary text. detokenize decodes the
// bytes with errors="replace" (Python's rules, see utf8.h).
//
// Unicode categories (\p{L}, \p{N}) come from utf8proc; \s is Unicode's
// White_Space property (categories Zs, Zl, Zp, plus U+0009..U+000D and U+0085),
// what the `regex` module encoder.py uses matches.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  static constexpr std::string_view kEodToken = "<|endoftext|>";

  // vocab_json: the text of vocab.json (GPT-2's encoder.json); merges_txt: the
  // text of merges.txt (vocab.bpe, first line "#version: ..."). `source` names
  // them in errors.
  Gpt2BpeTokenizer(std::string_view vocab_json, std::string_view merges_txt,
                   std::string_view vocab_source = "vocab.json",
                   std::string_view merges_source = "merges.txt");
  static Gpt2BpeTokenizer load(const std::string& vocab_file, const std::string& merge_file);

  std::string type() const override { return "GPT2BPETokenizer"; }
  int64_t vocab_size() const override { return int64_t(token_bytes_.size()); }
  int32_t eod() const override { return eod_; }
  void tokenize_append(std::string_view text, std::vector<int32_t>& out) const override;
  std::string detokenize(std::span<const int32_t> ids) const override;
  bool append_token_bytes(int32_t id, std::string& out) const override;
  nlohmann::json describe() const override;

  // The pieces of the pre-tokenisation regex over `text` (valid UTF-8;
  // throws naming the byte offset otherwise), in order; they concatenate to
  // `text`.
  static std::vector<std::string_view> pre_tokenize(std::string_view text);
  // The raw bytes of token `id`.
  const std::string& token_bytes(int32_t id) const { return token_bytes_.at(size_t(id)); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;  // id of the concatenation
  };
  // Open-addressing map (id_a, id_b) -> Merge, built once.
  struct MergeTable {
    std::vector<uint64_t> keys;  // (a << 32 | b) + 1; 0 = empty
    std::vector<Merge> values;
    uint64_t mask = 0;
    void build(const std::vector<std::pair<uint64_t, Merge>>& entries);
    const Merge* find(int32_t a, int32_t b) const;
  };

  // Ids of one pre-token piece, through BPE (no cache).
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> token_bytes_;  // id -> bytes
  int32_t byte_id_[256];                  // id of each single byte
  MergeTable merges_;
  int32_t eod_ = -1;
  std::string vocab_file_, merge_file_, vocab_sha256_, merge_sha256_;
  uint64_t instance_id_ = 0;  // keys the per-thread piece cache
};

}  // namespace mt
