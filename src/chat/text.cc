#include "chat/text.h"

#include <cstdint>

namespace mt::chat {
namespace {

// The code point at s[pos] and its length in bytes (a stray byte as itself).
uint32_t decode(std::string_view s, size_t pos, size_t& len) {
  const auto b = static_cast<unsigned char>(s[pos]);
  len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (b < 0x80 || b < 0xC0 || pos + len > s.size()) {
    len = 1;
    return b;
  }
  uint32_t cp = b & (0x3F >> (len - 1));
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  return cp;
}

bool is_space_cp(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

size_t space_at(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t len = 0;
  return is_space_cp(decode(s, pos, len)) ? len : 0;
}

size_t space_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t len = 0;
  const uint32_t cp = decode(s, start, len);
  return start + len == end && is_space_cp(cp) ? len : 0;
}

std::string trim(std::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  while (left && b < e) {
    const size_t n = space_at(s, b);
    if (n == 0) break;
    b += n;
  }
  while (right && e > b) {
    const size_t n = space_before(s, e);
    if (n == 0) break;
    e -= n;
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_whitespace(std::string_view s, long maxsplit) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    while (pos < s.size() && space_at(s, pos) > 0) pos += space_at(s, pos);
    if (pos >= s.size()) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) >= maxsplit) {
      out.emplace_back(s.substr(pos));
      break;
    }
    size_t end = pos;
    while (end < s.size() && space_at(s, end) == 0) ++end;
    out.emplace_back(s.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    decode(s, pos, len);
    out.emplace_back(s.substr(pos, len));
    pos += len;
  }
  return out;
}

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

}  // namespace mt::chat
