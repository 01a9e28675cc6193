#include "data/utf8.h"

namespace mt {

namespace {

// Length of the longest valid prefix (0..4) of the sequence at s[0, n) and the
// full length the lead byte announces (0 for a byte that cannot lead).
struct SeqInfo {
  int valid;   // bytes of s that form a valid (possibly incomplete) prefix
  int needed;  // full sequence length, 0 if s[0] cannot lead
};

SeqInfo inspect(const unsigned char* s, size_t n) {
  const unsigned char b = s[0];
  if (b < 0x80) return {1, 1};
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;  // no overlongs
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;  // no overlongs
    if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {0, 0};
  }
  int valid = 1;
  for (int k = 1; k < need && size_t(k) < n; ++k) {
    const unsigned char c = s[k];
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++valid;
  }
  return {valid, need};
}

}  // namespace

size_t utf8_first_invalid(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const SeqInfo q = inspect(s + i, n - i);
    if (q.needed == 0 || q.valid < q.needed) return i;
    i += size_t(q.needed);
  }
  return n;
}

size_t utf8_decode_replace(std::string_view bytes, std::string& out, bool final) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      size_t j = i + 1;
      while (j < n && s[j] < 0x80) ++j;
      out.append(bytes.data() + i, j - i);
      i = j;
      continue;
    }
    const SeqInfo q = inspect(s + i, n - i);
    if (q.needed > 0 && q.valid == q.needed) {
      out.append(bytes.data() + i, size_t(q.needed));
      i += size_t(q.needed);
    } else if (q.needed > 0 && i + size_t(q.valid) == n && !final) {
      break;  // valid so far, the rest may come with the next chunk
    } else {
      out += kReplacement;  // the maximal ill-formed subpart
      i += size_t(q.valid > 0 ? q.valid : 1);
    }
  }
  return i;
}

}  // namespace mt
