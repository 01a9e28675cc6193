#include "data/hf_normalizers.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/error.h"
#include "data/char_tokenizer.h"
#include "data/hf_text.h"

namespace mt {

namespace {

std::string utf8proc_map_or_fail(const std::string& text, int options, const char* name) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          utf8proc_ssize_t(text.size()), &out, utf8proc_option_t(options));
  MT_CHECK(n >= 0, "normalizer ", name, " failed: ", utf8proc_errmsg(n));
  std::string s(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  return s;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string_view::npos; at = hit + from.size()) {
    out.append(text, at, hit - at);
    out += to;
  }
  out.append(text, at, std::string_view::npos);
  return out;
}

bool is_composition_second(char32_t cp, const utf8proc_property_t* p) {
  if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A7 && cp <= 0x11C2))
    return true;  // Hangul V, T (utf8proc takes U+11A7 too)
  return p->comb_index != UINT16_MAX && p->comb_index >= 0x8000;
}

// Unicode's quick check (UAX #15): a text whose every character is NFC_QC=Yes
// (compat: NFKC_QC=Yes) and of combining class 0 is already normalized. Below
// U+10000 the answer per character comes from a table built once (a character
// is Yes when it normalizes to itself alone and never composes with the one
// before it); above, a character without a (compat: any) decomposition that
// never composes is Yes.
struct QuickCheck {
  std::vector<bool> yes;
  explicit QuickCheck(bool compat) : yes(0x10000, false) {
    const int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    for (char32_t cp = 0; cp < 0x10000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      const utf8proc_property_t* p = utf8proc_get_property(utf8proc_int32_t(cp));
      if (p->combining_class != 0 || is_composition_second(cp, p)) continue;
      std::string one;
      utf8_append(cp, one);
      yes[cp] = cp < 0x80 || utf8proc_map_or_fail(one, options, "quick check") == one;
    }
  }
};

bool composed_stable(std::string_view s, bool compat) {
  static const QuickCheck nfc(false), nfkc(true);
  const std::vector<bool>& yes = compat ? nfkc.yes : nfc.yes;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    const char32_t cp = hf_char_at(s, i, len);
    if (cp < 0x10000) {
      if (!yes[cp]) return false;
      continue;
    }
    const utf8proc_property_t* p = utf8proc_get_property(utf8proc_int32_t(cp));
    if (p->combining_class != 0 || is_composition_second(cp, p)) return false;
    if (p->decomp_seqindex != UINT16_MAX && (compat || p->decomp_type == 0)) return false;
  }
  return true;
}

}  // namespace

HfNormalizer hf_normalizer_from_json(const nlohmann::json& j, const std::string& where) {
  MT_CHECK(j.is_object() && j.contains("type"), where,
           ": a normalizer without a \"type\"; the "
           "file is damaged");
  const std::string type = j.at("type").get<std::string>();
  HfNormalizer n;
  using K = HfNormalizer::Kind;
  if (type == "NFC") {
    n.kind = K::kNfc;
  } else if (type == "NFD") {
    n.kind = K::kNfd;
  } else if (type == "NFKC") {
    n.kind = K::kNfkc;
  } else if (type == "NFKD") {
    n.kind = K::kNfkd;
  } else if (type == "Lowercase") {
    n.kind = K::kLowercase;
  } else if (type == "Strip") {
    n.kind = K::kStrip;
    n.strip_left = j.value("strip_left", true);
    n.strip_right = j.value("strip_right", true);
  } else if (type == "Prepend") {
    n.kind = K::kPrepend;
    n.content = j.at("prepend").get<std::string>();
  } else if (type == "Replace") {
    n.kind = K::kReplace;
    n.content = j.at("content").get<std::string>();
    const nlohmann::json& p = j.at("pattern");
    if (p.contains("Regex"))
      n.regex = std::make_shared<HfRegex>(p.at("Regex").get<std::string>(), where + " (Replace normalizer)");
    else
      n.pattern = p.at("String").get<std::string>();
  } else if (type == "Sequence") {
    n.kind = K::kSequence;
    for (const nlohmann::json& c : j.at("normalizers"))
      n.children.push_back(hf_normalizer_from_json(c, where));
  } else {
    MT_FAIL(where, ": normalizer type \"", type,
            "\" is not supported by megatron.cpp's "
            "HuggingFaceTokenizer (src/data/hf_normalizers.cc builds NFC, NFD, NFKC, NFKD, "
            "Lowercase, Strip, Replace, Prepend, Sequence); fix: use a tokenizer without it");
  }
  return n;
}

std::string hf_normalize(const HfNormalizer& n, std::string text) {
  using K = HfNormalizer::Kind;
  switch (n.kind) {
    case K::kNfc:
      return composed_stable(text, false)
                 ? text
                 : utf8proc_map_or_fail(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE, "NFC");
    case K::kNfd:
      return utf8proc_map_or_fail(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, "NFD");
    case K::kNfkc:
      return composed_stable(text, true)
                 ? text
                 : utf8proc_map_or_fail(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, "NFKC");
    case K::kNfkd:
      return utf8proc_map_or_fail(text, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, "NFKD");
    case K::kLowercase: {
      std::string out;
      out.reserve(text.size());
      for (size_t i = 0, len = 0; i < text.size(); i += len) {
        const char32_t cp = hf_char_at(text, i, len);
        if (cp == 0x130) {  // Rust's full mapping: U+0130 -> "i" + U+0307
          out += "i\xCC\x87";
          continue;
        }
        utf8_append(char32_t(utf8proc_tolower(utf8proc_int32_t(cp))), out);
      }
      return out;
    }
    case K::kStrip: {
      size_t b = 0, e = text.size();
      if (n.strip_left)
        for (size_t len = 0; b < e && hf_is_whitespace(hf_char_at(text, b, len)); b += len) {
        }
      if (n.strip_right)
        while (e > b) {
          size_t s = e - 1;
          while (s > b && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
          size_t len = 0;
          if (!hf_is_whitespace(hf_char_at(text, s, len))) break;
          e = s;
        }
      return text.substr(b, e - b);
    }
    case K::kPrepend:
      return text.empty() ? text : n.content + text;
    case K::kReplace: {
      if (!n.regex) return replace_all(text, n.pattern, n.content);
      std::vector<std::pair<size_t, size_t>> hits;
      n.regex->find_all(text, hits);
      std::string out;
      size_t at = 0;
      for (const auto& [b, e] : hits) {
        out.append(text, at, b - at);
        out += n.content;
        at = e;
      }
      out.append(text, at, std::string::npos);
      return out;
    }
    case K::kSequence:
      for (const HfNormalizer& c : n.children) text = hf_normalize(c, std::move(text));
      return text;
  }
  return text;
}

}  // namespace mt
