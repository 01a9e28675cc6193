// Added tokens of a Hugging Face tokenizer.json ("added_tokens"): matched in
// the text before the model sees it, as tokenizers' AddedVocabulary:
//   1. tokens with normalized = false are found in the original text;
//   2. the text between them is normalized, and tokens with normalized = true
//      are found in that;
//   3. what is left goes through the pre-tokenizer and the model.
// Matching is leftmost-longest over all tokens of a kind; a match of a
// single_word token that touches a word character (alphanumeric or '_') on
// either side is skipped; lstrip / rstrip extend the match over the
// whitespace to its left / right (never into the previous match). Special
// and non-special tokens are matched alike (transformers'
// split_special_tokens = false).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace mt {

struct HfAddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// A byte trie over the contents of a set of added tokens.
class HfAddedMatcher {
 public:
  void build(const std::vector<HfAddedToken>& tokens, bool normalized);
  bool empty() const { return tokens_.empty(); }

  // Cuts `text` into pieces: (token index or -1 for plain text, begin, end).
  struct Cut {
    int32_t token;  // index into the tokens given to build(), -1 = text
    size_t begin, end;
  };
  void split(std::string_view text, std::vector<Cut>& out) const;
  const HfAddedToken& token(int32_t k) const { return tokens_[size_t(k)]; }

 private:
  // Length and token of the longest token starting at text[at], or 0.
  size_t longest_at(std::string_view text, size_t at, int32_t& token) const;

  struct Node {
    int32_t token = -1;                             // a token ends here
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
  };
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
  std::vector<HfAddedToken> tokens_;
};

std::vector<HfAddedToken> hf_added_tokens_from_json(const nlohmann::json& added, const std::string& where);

}  // namespace mt
