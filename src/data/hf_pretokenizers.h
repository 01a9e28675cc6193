// The "pre_tokenizer" stage of a Hugging Face tokenizer.json: cuts the
// normalized text into pieces that the model encodes one at a time.
// Built: ByteLevel (add_prefix_space, use_regex: GPT-2's expression), Split
// (a String or a Regex pattern, behaviors Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous, and invert), Metaspace
// (replacement, prepend_scheme always/first/never, split), Digits
// (individual_digits), Punctuation, Whitespace, WhitespaceSplit,
// BertPreTokenizer, Sequence. Others (CharDelimiterSplit, UnicodeScripts,
// FixedLength…) are refused by name.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/hf_regex.h"

namespace mt {

// One piece of the text between pre-tokenizers; at_start: it begins at
// offset 0 of the original text (Metaspace's prepend_scheme "first").
struct HfPiece {
  std::string text;
  bool at_start = false;
};

enum class HfSplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct HfPreTokenizer {
  enum class Kind {
    kByteLevel,
    kSplit,
    kMetaspace,
    kDigits,
    kPunctuation,
    kWhitespace,
    kWhitespaceSplit,
    kBert,
    kSequence
  };
  Kind kind = Kind::kSequence;
  bool add_prefix_space = false, use_regex = true;  // ByteLevel
  std::string literal;                              // Split with a String pattern
  std::shared_ptr<HfRegex> regex;                   // Split (Regex), ByteLevel, Whitespace
  HfSplitBehavior behavior = HfSplitBehavior::kIsolated;
  bool invert = false;
  std::string replacement;  // Metaspace (one character, UTF-8)
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;                     // Metaspace
  bool individual_digits = false;        // Digits
  std::vector<HfPreTokenizer> children;  // Sequence
};

HfPreTokenizer hf_pre_tokenizer_from_json(const nlohmann::json& j, const std::string& where);
// Applies `p` to `pieces` in place.
void hf_pre_tokenize(const HfPreTokenizer& p, std::vector<HfPiece>& pieces);

// GPT-2's pre-tokenization expression (ByteLevel with use_regex).
extern const char* const kHfGpt2Pattern;

// Splits `text` at `spans` (byte ranges with is_match, covering the text in
// order) as `behavior` says; returns the kept (begin, end) ranges, empty ones
// dropped. Exposed for tests.
struct HfSpan {
  size_t begin, end;
  bool is_match;
};
std::vector<std::pair<size_t, size_t>> hf_split_spans(std::vector<HfSpan> spans, HfSplitBehavior behavior,
                                                      bool invert);

}  // namespace mt
