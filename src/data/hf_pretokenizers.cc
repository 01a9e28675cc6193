#include "data/hf_pretokenizers.h"

#include <algorithm>

#include "core/error.h"
#include "data/hf_text.h"

namespace mt {

const char* const kHfGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

HfSplitBehavior behavior_of(const std::string& s, const std::string& where) {
  if (s == "Removed") return HfSplitBehavior::kRemoved;
  if (s == "Isolated") return HfSplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return HfSplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return HfSplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return HfSplitBehavior::kContiguous;
  MT_FAIL(where, ": split behavior \"", s,
          "\" is unknown (src/data/hf_pretokenizers.cc knows "
          "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

// Spans of a regex's matches over `text`, as tokenizers' Pattern for Regex.
std::vector<HfSpan> regex_spans(const HfRegex& re, std::string_view text) {
  if (text.empty()) return {{0, 0, false}};
  thread_local std::vector<std::pair<size_t, size_t>> hits;
  hits.clear();
  re.find_all(text, hits);
  std::vector<HfSpan> spans;
  size_t prev = 0;
  for (const auto& [b, e] : hits) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

std::vector<HfSpan> literal_spans(std::string_view lit, std::string_view text) {
  if (lit.empty() || text.empty()) return {{0, text.size(), false}};
  std::vector<HfSpan> spans;
  size_t prev = 0;
  for (size_t hit; (hit = text.find(lit, prev)) != std::string_view::npos;) {
    if (prev != hit) spans.push_back({prev, hit, false});
    spans.push_back({hit, hit + lit.size(), true});
    prev = hit + lit.size();
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

// Each character for which pred holds is one match (tokenizers' Pattern for Fn(char)).
template <class Pred>
std::vector<HfSpan> char_spans(std::string_view text, Pred pred) {
  std::vector<HfSpan> spans;
  size_t last = 0, len = 0;
  for (size_t i = 0; i < text.size(); i += len) {
    const char32_t cp = hf_char_at(text, i, len);
    if (!pred(cp)) continue;
    if (last < i) spans.push_back({last, i, false});
    spans.push_back({i, i + len, true});
    last = i + len;
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
  return spans;
}

void split_pieces(std::vector<HfPiece>& pieces, HfSplitBehavior behavior, bool invert, const auto& spans_of) {
  std::vector<HfPiece> out;
  out.reserve(pieces.size());
  for (HfPiece& p : pieces) {
    for (const auto& [b, e] : hf_split_spans(spans_of(std::string_view(p.text)), behavior, invert))
      out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
  }
  pieces.swap(out);
}

}  // namespace

std::vector<std::pair<size_t, size_t>> hf_split_spans(std::vector<HfSpan> spans, HfSplitBehavior behavior,
                                                      bool invert) {
  if (invert)
    for (HfSpan& s : spans) s.is_match = !s.is_match;
  std::vector<HfSpan> acc;
  bool previous_match = false;
  switch (behavior) {
    case HfSplitBehavior::kIsolated:
      acc = spans;
      break;
    case HfSplitBehavior::kRemoved:
      for (const HfSpan& s : spans)
        if (!s.is_match) acc.push_back(s);
      break;
    case HfSplitBehavior::kMergedWithPrevious:
      for (const HfSpan& s : spans) {
        if (s.is_match && !previous_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back(s);
        previous_match = s.is_match;
      }
      break;
    case HfSplitBehavior::kMergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const HfSpan& s = spans[k];
        if (s.is_match && !previous_match && !acc.empty())
          acc.back().begin = s.begin;
        else
          acc.push_back(s);
        previous_match = s.is_match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case HfSplitBehavior::kContiguous:
      for (const HfSpan& s : spans) {
        if (s.is_match == previous_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back(s);
        previous_match = s.is_match;
      }
      break;
  }
  std::vector<std::pair<size_t, size_t>> out;
  out.reserve(acc.size());
  for (const HfSpan& s : acc)
    if (s.end > s.begin) out.emplace_back(s.begin, s.end);
  return out;
}

HfPreTokenizer hf_pre_tokenizer_from_json(const nlohmann::json& j, const std::string& where) {
  MT_CHECK(j.is_object() && j.contains("type"), where,
           ": a pre_tokenizer without a \"type\"; the "
           "file is damaged");
  const std::string type = j.at("type").get<std::string>();
  using K = HfPreTokenizer::Kind;
  HfPreTokenizer p;
  if (type == "ByteLevel") {
    p.kind = K::kByteLevel;
    p.add_prefix_space = j.value("add_prefix_space", true);
    p.use_regex = j.value("use_regex", true);
    if (p.use_regex) p.regex = std::make_shared<HfRegex>(kHfGpt2Pattern, "ByteLevel pre-tokenizer");
  } else if (type == "Split") {
    p.kind = K::kSplit;
    const nlohmann::json& pat = j.at("pattern");
    if (pat.contains("Regex"))
      p.regex =
          std::make_shared<HfRegex>(pat.at("Regex").get<std::string>(), where + " (Split pre-tokenizer)");
    else
      p.literal = pat.at("String").get<std::string>();
    p.behavior = behavior_of(j.at("behavior").get<std::string>(), where);
    p.invert = j.value("invert", false);
  } else if (type == "Metaspace") {
    p.kind = K::kMetaspace;
    p.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    const bool add_prefix = j.value("add_prefix_space", true);
    const std::string scheme = j.contains("prepend_scheme") && j.at("prepend_scheme").is_string()
                                   ? j.at("prepend_scheme").get<std::string>()
                                   : (add_prefix ? "always" : "never");
    if (scheme == "always")
      p.prepend = HfPreTokenizer::Prepend::kAlways;
    else if (scheme == "first")
      p.prepend = HfPreTokenizer::Prepend::kFirst;
    else if (scheme == "never")
      p.prepend = HfPreTokenizer::Prepend::kNever;
    else
      MT_FAIL(where, ": Metaspace prepend_scheme \"", scheme, "\" is unknown (always, first, never)");
    p.split = j.value("split", true);
  } else if (type == "Digits") {
    p.kind = K::kDigits;
    p.individual_digits = j.value("individual_digits", false);
  } else if (type == "Punctuation") {
    p.kind = K::kPunctuation;
    p.behavior = behavior_of(j.value("behavior", std::string("Isolated")), where);
  } else if (type == "Whitespace") {
    p.kind = K::kWhitespace;
    p.regex = std::make_shared<HfRegex>("\\w+|[^\\w\\s]+", "Whitespace pre-tokenizer");
  } else if (type == "WhitespaceSplit") {
    p.kind = K::kWhitespaceSplit;
  } else if (type == "BertPreTokenizer") {
    p.kind = K::kBert;
  } else if (type == "Sequence") {
    p.kind = K::kSequence;
    for (const nlohmann::json& c : j.at("pretokenizers"))
      p.children.push_back(hf_pre_tokenizer_from_json(c, where));
  } else {
    MT_FAIL(where, ": pre_tokenizer type \"", type,
            "\" is not supported by megatron.cpp's "
            "HuggingFaceTokenizer (src/data/hf_pretokenizers.cc builds ByteLevel, Split, Metaspace, "
            "Digits, Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer, Sequence); fix: use "
            "a tokenizer without it");
  }
  return p;
}

void hf_pre_tokenize(const HfPreTokenizer& p, std::vector<HfPiece>& pieces) {
  using K = HfPreTokenizer::Kind;
  using B = HfSplitBehavior;
  switch (p.kind) {
    case K::kByteLevel: {
      if (p.add_prefix_space)
        for (HfPiece& piece : pieces)
          if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(0, 1, ' ');
      if (p.use_regex)
        split_pieces(pieces, B::kIsolated, false,
                     [&](std::string_view t) { return regex_spans(*p.regex, t); });
      for (HfPiece& piece : pieces) {
        std::string mapped;
        mapped.reserve(piece.text.size() + piece.text.size() / 2);
        for (const char c : piece.text) mapped += hf_byte_char_utf8(static_cast<uint8_t>(c));
        piece.text.swap(mapped);
      }
      return;
    }
    case K::kSplit:
      if (p.regex)
        split_pieces(pieces, p.behavior, p.invert,
                     [&](std::string_view t) { return regex_spans(*p.regex, t); });
      else
        split_pieces(pieces, p.behavior, p.invert,
                     [&](std::string_view t) { return literal_spans(p.literal, t); });
      return;
    case K::kMetaspace: {
      for (HfPiece& piece : pieces) {
        std::string r;
        for (const char c : piece.text) {
          if (c == ' ')
            r += p.replacement;
          else
            r += c;
        }
        const bool starts = r.compare(0, p.replacement.size(), p.replacement) == 0;
        if (!starts && (p.prepend == HfPreTokenizer::Prepend::kAlways ||
                        (p.prepend == HfPreTokenizer::Prepend::kFirst && piece.at_start)))
          r.insert(0, p.replacement);
        piece.text.swap(r);
      }
      if (p.split)
        split_pieces(pieces, B::kMergedWithNext, false,
                     [&](std::string_view t) { return literal_spans(p.replacement, t); });
      return;
    }
    case K::kDigits:
      split_pieces(pieces, p.individual_digits ? B::kIsolated : B::kContiguous, false,
                   [](std::string_view t) { return char_spans(t, hf_is_numeric); });
      return;
    case K::kPunctuation:
      split_pieces(pieces, p.behavior, false,
                   [](std::string_view t) { return char_spans(t, hf_is_punctuation); });
      return;
    case K::kWhitespace:
      split_pieces(pieces, B::kRemoved, true, [&](std::string_view t) { return regex_spans(*p.regex, t); });
      return;
    case K::kWhitespaceSplit:
      split_pieces(pieces, B::kRemoved, false,
                   [](std::string_view t) { return char_spans(t, hf_is_whitespace); });
      return;
    case K::kBert:
      split_pieces(pieces, B::kRemoved, false,
                   [](std::string_view t) { return char_spans(t, hf_is_whitespace); });
      split_pieces(pieces, B::kIsolated, false,
                   [](std::string_view t) { return char_spans(t, hf_is_punctuation); });
      return;
    case K::kSequence:
      for (const HfPreTokenizer& c : p.children) hf_pre_tokenize(c, pieces);
      return;
  }
}

}  // namespace mt
