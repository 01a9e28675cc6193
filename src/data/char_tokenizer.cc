#include "data/char_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace mt {

// -------------------------------------------------------------------- UTF-8

namespace {

// Number of bytes of a sequence led by `b`, or 0 for a byte that cannot lead.
int utf8_lead_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

void append_hex4(std::string& out, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", v);
  out += buf;
}

}  // namespace

void utf8_decode(std::string_view text, std::vector<char32_t>& out, int64_t base_offset,
                 std::string_view source) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    const int len = utf8_lead_length(b);
    bool ok = len > 0 && i + size_t(len) <= n;
    char32_t cp = 0;
    if (ok) {
      cp = len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
      for (int k = 1; k < len; ++k) {
        const unsigned char c = s[i + size_t(k)];
        if ((c & 0xC0) != 0x80) {
          ok = false;
          break;
        }
        cp = (cp << 6) | (c & 0x3F);
      }
      // Overlong 3/4-byte forms, UTF-16 surrogates, values past U+10FFFF.
      if (ok && len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
      if (ok && len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ok = false;
    }
    if (!ok) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", unsigned(b));
      MT_FAIL("invalid UTF-8 in ", source, " at byte offset ", base_offset + int64_t(i),
              " (byte ", hex, i + size_t(std::max(len, 1)) > n && len > 0 ? ", truncated" : "",
              "); fix: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
    }
    out.push_back(cp);
    i += size_t(len);
  }
}

void utf8_append(char32_t cp, std::string& out) {
  MT_CHECK(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF), "cannot encode code point ",
           uint32_t(cp), " as UTF-8 (not a Unicode scalar value)");
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

size_t utf8_complete_prefix(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  // A character is at most 4 bytes: look back at most 3 bytes for a lead.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char b = s[n - back];
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    const int len = utf8_lead_length(b);
    return (len > int(back)) ? n - back : n;
  }
  return n;
}

std::string describe_code_point(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(cp));
  std::string s = buf;
  if (cp >= 0x20 && cp != 0x7F && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) &&
      !(cp >= 0x80 && cp < 0xA0)) {
    s += " '";
    utf8_append(cp, s);
    s += "'";
  }
  return s;
}

// ------------------------------------------------------------ CharTokenizer

void CharTokenizer::build_lookup() {
  sorted_.clear();
  for (size_t i = 0; i < chars_.size(); ++i) sorted_.emplace_back(chars_[i], int32_t(i));
  std::sort(sorted_.begin(), sorted_.end());
  for (size_t i = 1; i < sorted_.size(); ++i) {
    MT_CHECK(sorted_[i].first != sorted_[i - 1].first, "vocabulary lists ",
             describe_code_point(sorted_[i].first), " twice (ids ", sorted_[i - 1].second, " and ",
             sorted_[i].second, "); fix: rebuild the vocabulary with `megatron preprocess`");
  }
  std::fill(std::begin(ascii_), std::end(ascii_), -1);
  for (size_t i = 0; i < chars_.size(); ++i)
    if (chars_[i] < 128) ascii_[chars_[i]] = int32_t(i);
}

CharTokenizer CharTokenizer::from_code_points(std::vector<char32_t> code_points, bool with_eod) {
  std::sort(code_points.begin(), code_points.end());
  code_points.erase(std::unique(code_points.begin(), code_points.end()), code_points.end());
  CharTokenizer t;
  t.chars_ = std::move(code_points);
  t.has_eod_ = with_eod;
  t.build_lookup();
  return t;
}

CharTokenizer CharTokenizer::from_text(std::string_view text, bool with_eod) {
  std::vector<char32_t> cps;
  utf8_decode(text, cps, 0, "text");
  return from_code_points(std::move(cps), with_eod);
}

CharTokenizer CharTokenizer::from_json(std::string_view json, std::string_view source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("vocabulary ", source, " is not valid JSON (", e.what(),
            "); fix: point to the <prefix>_vocab.json written by `megatron preprocess`");
  }
  MT_CHECK(j.is_array(), "vocabulary ", source,
           " must be a JSON array of one-character strings; fix: point to the "
           "<prefix>_vocab.json written by `megatron preprocess`");
  CharTokenizer t;
  for (size_t i = 0; i < j.size(); ++i) {
    MT_CHECK(j[i].is_string(), "vocabulary ", source, " entry ", i, " is not a string");
    const std::string s = j[i].get<std::string>();
    if (i + 1 == j.size() && s == kEodToken) {
      t.has_eod_ = true;
      break;
    }
    std::vector<char32_t> cps;
    utf8_decode(s, cps, 0, source);
    MT_CHECK(cps.size() == 1, "vocabulary ", source, " entry ", i, " holds ", cps.size(),
             " characters; a character vocabulary needs exactly one per entry (\"",
             std::string(kEodToken), "\" is allowed only as the last entry)");
    t.chars_.push_back(cps[0]);
  }
  t.build_lookup();
  return t;
}

CharTokenizer CharTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MT_CHECK(in.good(), "cannot open vocabulary ", path, ": ", std::strerror(errno),
           "; fix: pass the <prefix>_vocab.json written by `megatron preprocess`");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path);
}

std::string CharTokenizer::to_json() const {
  std::string out = "[";
  auto put_string = [&](std::u32string_view cps) {
    out += '"';
    for (char32_t cp : cps) {
      switch (cp) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (cp >= 0x20 && cp <= 0x7E) {
            out += char(cp);
          } else if (cp < 0x10000) {
            append_hex4(out, unsigned(cp));
          } else {  // UTF-16 surrogate pair, as Python's ensure_ascii does
            const unsigned v = unsigned(cp) - 0x10000;
            append_hex4(out, 0xD800 + (v >> 10));
            append_hex4(out, 0xDC00 + (v & 0x3FF));
          }
      }
    }
    out += '"';
  };
  for (size_t i = 0; i < chars_.size(); ++i) {
    if (i) out += ", ";
    put_string(std::u32string_view(&chars_[i], 1));
  }
  if (has_eod_) {
    if (!chars_.empty()) out += ", ";
    const std::u32string eod(kEodToken.begin(), kEodToken.end());
    put_string(eod);
  }
  out += "]";
  return out;
}

void CharTokenizer::save(const std::string& path) const {
  const std::string tmp = path + ".tmp", text = to_json();
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  MT_CHECK(f != nullptr, "cannot create ", tmp, ": ", std::strerror(errno),
           "; fix: check that the output directory exists and is writable");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  MT_CHECK(ok && closed, "write of ", tmp, " failed; fix: check free disk space");
  MT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "rename ", tmp, " -> ", path, " failed: ",
           std::strerror(errno));
}

int32_t CharTokenizer::id_of(char32_t cp) const {
  if (cp < 128) return ascii_[cp];
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::make_pair(cp, int32_t(-1)));
  return (it != sorted_.end() && it->first == cp) ? it->second : -1;
}

void CharTokenizer::tokenize_append(std::string_view text, std::vector<int32_t>& out,
                                    int64_t base_offset) const {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::vector<char32_t> cps;
  size_t i = 0;
  while (i < text.size()) {
    if (s[i] < 128 && ascii_[s[i]] >= 0) {  // fast path for known ASCII
      out.push_back(ascii_[s[i]]);
      ++i;
      continue;
    }
    const size_t len = s[i] < 128 ? 1 : std::max(1, utf8_lead_length(s[i]));
    cps.clear();
    utf8_decode(text.substr(i, std::min(len, text.size() - i)), cps, base_offset + int64_t(i));
    const int32_t id = id_of(cps[0]);
    MT_CHECK(id >= 0, "character ", describe_code_point(cps[0]), " at byte offset ",
             base_offset + int64_t(i), " is not in the ", chars_.size(),
             "-character vocabulary; fix: build the vocabulary from text that contains it "
             "(preprocess the whole corpus in one run)");
    out.push_back(id);
    i += len;
  }
}

std::vector<int32_t> CharTokenizer::tokenize(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  tokenize_append(text, ids);
  return ids;
}

std::string CharTokenizer::detokenize(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (has_eod_ && id == eod()) {
      out += kEodToken;
      continue;
    }
    MT_CHECK(id >= 0 && id < int32_t(chars_.size()), "token id ", id, " at position ", i,
             " is outside the vocabulary of size ", vocab_size(),
             "; fix: decode with the vocabulary the ids were made with");
    utf8_append(chars_[size_t(id)], out);
  }
  return out;
}

// ------------------------------------------------------------ NullTokenizer

NullTokenizer::NullTokenizer(int64_t vocab_size_without_eod) : n_(vocab_size_without_eod) {
  MT_CHECK(n_ > 0 && n_ < (int64_t(1) << 31) - 1, "NullTokenizer vocabulary size ", n_,
           " must be in [1, 2^31 - 2]; fix: pass --vocab-size N with the ids' range");
}

std::vector<int32_t> NullTokenizer::tokenize(std::string_view text) const {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    size_t j = i;
    while (j < text.size() && text[j] != ' ') ++j;
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + j, v);
    MT_CHECK(ec == std::errc() && ptr == text.data() + j && v >= 0 && v < vocab_size(),
             "NullTokenizer: \"", std::string(text.substr(i, j - i)),
             "\" is not an id in [0, ", vocab_size(), "); fix: give space-separated integer ids");
    ids.push_back(int32_t(v));
    i = j;
  }
  return ids;
}

std::string NullTokenizer::detokenize(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out;
}

}  // namespace mt
