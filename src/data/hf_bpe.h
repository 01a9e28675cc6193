// The "model" stage of a Hugging Face tokenizer.json: BPE, as tokenizers'
// models/bpe: each piece from the pre-tokenizer becomes one symbol per
// character (looked up in "vocab"; a character outside it becomes its
// <0xXX> byte tokens with byte_fallback, else unk_token, runs of unk fused
// into one with fuse_unk, or dropped without an unk_token), then the pair of
// adjacent symbols with the lowest merge rank is merged, leftmost first,
// until no pair is in "merges". With ignore_merges a piece that is itself in
// the vocabulary is that one token. Merges are "a b" strings or ["a", "b"]
// pairs. Refused by name: other model types (WordPiece, Unigram, WordLevel),
// BPE dropout, continuing_subword_prefix and end_of_word_suffix.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mt {

struct HfStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using HfVocab = std::unordered_map<std::string, int32_t, HfStringHash, std::equal_to<>>;

class HfBpe {
 public:
  // Reads the "model" object; `where` names the file in errors.
  static HfBpe from_json(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one pre-tokenized piece.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  const HfVocab& vocab() const { return vocab_; }
  // Token string of `id` ("" when the model has no such id).
  const std::string& id_to_token(int32_t id) const;
  int32_t max_id() const { return int32_t(id_to_token_.size()) - 1; }
  int32_t unk_id() const { return unk_id_; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  // Open addressing (a, b) -> Merge, built once: the hot lookup of merge_word.
  struct MergeTable {
    std::vector<uint64_t> keys;  // (a << 32 | b) + 1; 0 = empty
    std::vector<Merge> values;
    uint64_t mask = 0;
    void build(const std::unordered_map<uint64_t, Merge>& entries);
    const Merge* find(uint64_t key) const;
  };
  const Merge* find_merge(int32_t a, int32_t b) const;
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;

  HfVocab vocab_;
  std::vector<std::string> id_to_token_;
  MergeTable merges_;
  std::vector<int32_t> char_ids_;  // id of each one-character token below U+10000 (-1: none)
  int32_t byte_ids_[256];          // <0xXX> tokens for byte_fallback (-1: absent)
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  uint64_t instance_id_ = 0;
};

}  // namespace mt
