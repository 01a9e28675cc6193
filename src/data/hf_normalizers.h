// The "normalizer" stage of a Hugging Face tokenizer.json: text -> text,
// before pre-tokenization (and before the normalized added tokens are
// matched). Built: NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Strip,
// Replace (a String or a Regex pattern), Prepend, Sequence. Any other type
// (BertNormalizer, Precompiled, StripAccents, Nmt…) is refused by name.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/hf_regex.h"

namespace mt {

struct HfNormalizer {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStrip, kReplace, kPrepend, kSequence };
  Kind kind = Kind::kSequence;
  bool strip_left = false, strip_right = false;  // Strip
  std::string pattern;                           // Replace (String), the literal
  std::shared_ptr<HfRegex> regex;                // Replace (Regex)
  std::string content;                           // Replace: the replacement; Prepend: the prefix
  std::vector<HfNormalizer> children;            // Sequence
};

// Reads the "normalizer" object (`j` non-null); `where` names the file.
HfNormalizer hf_normalizer_from_json(const nlohmann::json& j, const std::string& where);
// Applies `n` to `text`.
std::string hf_normalize(const HfNormalizer& n, std::string text);

}  // namespace mt
