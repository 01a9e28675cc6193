#include "data/hf_added_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "data/hf_text.h"

namespace mt {

namespace {

// The last character of text[0, end) (valid UTF-8), or 0 when end == 0.
char32_t char_before(std::string_view text, size_t end) {
  if (end == 0) return 0;
  size_t s = end - 1;
  while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
  size_t len = 0;
  return hf_char_at(text, s, len);
}

bool is_word_char(char32_t cp) { return cp == '_' || hf_is_alphanumeric(cp); }

}  // namespace

std::vector<HfAddedToken> hf_added_tokens_from_json(const nlohmann::json& added, const std::string& where) {
  std::vector<HfAddedToken> out;
  if (added.is_null()) return out;
  MT_CHECK(added.is_array(), where, ": \"added_tokens\" is not a list; the file is damaged");
  for (const nlohmann::json& a : added) {
    HfAddedToken t;
    t.id = a.at("id").get<int32_t>();
    t.content = a.at("content").get<std::string>();
    t.single_word = a.value("single_word", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.special = a.value("special", false);
    t.normalized = a.value("normalized", !t.special);
    MT_CHECK(t.id >= 0 && !t.content.empty(), where, ": added token \"", t.content, "\" with id ", t.id,
             " is empty or has a negative id; the file is damaged");
    out.push_back(std::move(t));
  }
  return out;
}

void HfAddedMatcher::build(const std::vector<HfAddedToken>& tokens, bool normalized) {
  nodes_.assign(1, Node{});
  tokens_.clear();
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  for (const HfAddedToken& t : tokens) {
    if (t.normalized != normalized) continue;
    const int32_t k = int32_t(tokens_.size());
    tokens_.push_back(t);
    int32_t node = 0;
    for (const char ch : t.content) {
      const uint8_t c = static_cast<uint8_t>(ch);
      auto& next = nodes_[size_t(node)].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t(-1)));
      if (it != next.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t fresh = int32_t(nodes_.size());
        next.insert(it, {c, fresh});
        nodes_.emplace_back();
        node = fresh;
      }
    }
    if (nodes_[size_t(node)].token < 0) nodes_[size_t(node)].token = k;  // first of duplicates
    first_byte_[static_cast<uint8_t>(t.content[0])] = true;
  }
}

size_t HfAddedMatcher::longest_at(std::string_view text, size_t at, int32_t& token) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto& next = nodes_[size_t(node)].next;
    const uint8_t c = static_cast<uint8_t>(text[i]);
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t(-1)));
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes_[size_t(node)].token >= 0) {
      best = i + 1 - at;
      token = nodes_[size_t(node)].token;
    }
  }
  return best;
}

void HfAddedMatcher::split(std::string_view text, std::vector<Cut>& out) const {
  size_t done = 0;  // end of the last emitted piece
  size_t at = 0;
  while (at < text.size()) {
    int32_t k = -1;
    const size_t len = first_byte_[static_cast<uint8_t>(text[at])] ? longest_at(text, at, k) : 0;
    if (len == 0) {
      ++at;
      continue;
    }
    size_t start = at, stop = at + len;
    const HfAddedToken& t = tokens_[size_t(k)];
    if (t.single_word) {
      size_t clen = 0;
      const bool word_before = start > 0 && is_word_char(char_before(text, start));
      const bool word_after = stop < text.size() && is_word_char(hf_char_at(text, stop, clen));
      if (word_before || word_after) {
        at = stop;  // (leftmost-longest matches do not overlap)
        continue;
      }
    }
    if (t.lstrip)
      while (start > done && hf_is_whitespace(char_before(text, start))) {
        size_t s = start - 1;
        while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        start = s;
      }
    if (t.rstrip)
      for (size_t clen = 0; stop < text.size() && hf_is_whitespace(hf_char_at(text, stop, clen));)
        stop += clen;
    if (done < start) out.push_back({-1, done, start});
    out.push_back({k, start, stop});
    done = stop;
    at = stop;
  }
  if (done < text.size()) out.push_back({-1, done, text.size()});
}

}  // namespace mt
