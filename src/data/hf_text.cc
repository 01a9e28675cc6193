#include "data/hf_text.h"

#include <utf8proc.h>

#include <array>

#include "data/char_tokenizer.h"

namespace mt {

char32_t hf_char_at(std::string_view s, size_t i, size_t& len) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  len = hf_char_len(c);
  if (i + len > s.size()) len = 1;  // (never for valid UTF-8)
  switch (len) {
    case 1:
      return c;
    case 2:
      return char32_t(c & 0x1F) << 6 | (b(1) & 0x3F);
    case 3:
      return char32_t(c & 0x0F) << 12 | char32_t(b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    default:
      return char32_t(c & 0x07) << 18 | char32_t(b(1) & 0x3F) << 12 | char32_t(b(2) & 0x3F) << 6 |
             (b(3) & 0x3F);
  }
}

bool hf_is_whitespace(char32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85) return true;
  if (cp < 0x80) return false;
  const auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

bool hf_is_numeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool hf_is_alphanumeric(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  const auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool hf_is_punctuation(char32_t cp) {
  if (cp < 0x80)
    return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') ||
           (cp >= '{' && cp <= '~');
  const auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

namespace {

struct ByteTable {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};
  std::array<std::string, 256> utf8;
  ByteTable() {
    bool printable[256] = {};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    int extra = 0;
    to_byte.fill(-1);
    for (int b = 0; b < 256; ++b) {
      to_char[b] = printable[b] ? char32_t(b) : char32_t(256 + extra++);
      to_byte[to_char[b]] = int16_t(b);
      utf8_append(to_char[b], utf8[b]);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

char32_t hf_byte_to_char(uint8_t b) { return byte_table().to_char[b]; }
int hf_char_to_byte(char32_t cp) { return cp < 324 ? byte_table().to_byte[cp] : -1; }
const std::string& hf_byte_char_utf8(uint8_t b) { return byte_table().utf8[b]; }

}  // namespace mt
