#include "data/gpt2_bpe_tokenizer.h"

// Unicode categories: utf8proc rather than ICU. The pre-tokeniser needs one
// thing, the general category of a code point; utf8proc is a ~400 KB C
// library with exactly those tables (plus normalisation we do not use) and
// one plain function, utf8proc_category(). ICU's libicu is ~35 MB of data and
// API (UnicodeSet, UText, collation, converters) for the same lookup, with a
// versioned C++ ABI to track. Both are Debian packages; the smaller one that
// does the job is the one STYLE.md asks for.
#include <utf8proc.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/char_tokenizer.h"
#include "data/sha256.h"
#include "data/utf8.h"

namespace mt {

namespace {

// ----------------------------------------------------- byte <-> unicode table

// encoder.py's bytes_to_unicode(): printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100.. in byte order.
void byte_unicode_tables(char32_t byte_to_cp[256], int16_t cp_to_byte[324]) {
  bool printable[256] = {};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  int extra = 0;
  for (int b = 0; b < 256; ++b) byte_to_cp[b] = printable[b] ? char32_t(b) : char32_t(256 + extra++);
  std::fill(cp_to_byte, cp_to_byte + 324, int16_t(-1));
  for (int b = 0; b < 256; ++b) cp_to_byte[byte_to_cp[b]] = int16_t(b);
}

// The bytes a vocab.json / merges.txt symbol stands for.
std::string symbol_bytes(std::string_view sym, const int16_t cp_to_byte[324], std::string_view source) {
  std::vector<char32_t> cps;
  utf8_decode(sym, cps, 0, source);
  std::string out;
  for (char32_t cp : cps) {
    MT_CHECK(cp < 324 && cp_to_byte[cp] >= 0, source, ": symbol \"", std::string(sym),
             "\" holds ", describe_code_point(cp),
             ", which is not in GPT-2's byte-to-unicode table; fix: pass GPT-2's vocab.json and "
             "merges.txt (scripts/fetch_gpt2_tokenizer.sh)");
    out += char(cp_to_byte[cp]);
  }
  return out;
}

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

uint64_t hash_u64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// ------------------------------------------------------------ pre-tokeniser

enum Cls : uint8_t { kLetter, kNumber, kSpace, kOther };

struct AsciiClasses {
  Cls c[128];
  constexpr AsciiClasses() : c() {
    for (int b = 0; b < 128; ++b) {
      c[b] = kOther;
      if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) c[b] = kLetter;
      if (b >= '0' && b <= '9') c[b] = kNumber;
      if ((b >= 0x09 && b <= 0x0D) || b == ' ') c[b] = kSpace;
    }
  }
};
constexpr AsciiClasses kAscii;

Cls classify(char32_t cp) {
  switch (utf8proc_category(utf8proc_int32_t(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return kNumber;
    case UTF8PROC_CATEGORY_ZS:  // White_Space = Zs + Zl + Zp + U+0009..000D + U+0085
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return kSpace;
    default:
      return cp == 0x85 ? kSpace : kOther;
  }
}

[[noreturn]] void invalid_utf8(const unsigned char* s, size_t i) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", unsigned(s[i]));
  MT_FAIL("invalid UTF-8 at byte offset ", i, " (byte ", hex,
          "); fix: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
}

// Class and byte length of the character at s[i] (i < n).
inline Cls class_at(const unsigned char* s, size_t n, size_t i, size_t* len) {
  const unsigned char b = s[i];
  if (b < 0x80) {
    *len = 1;
    return kAscii.c[b];
  }
  const size_t valid = utf8_first_invalid(std::string_view(
      reinterpret_cast<const char*>(s + i), std::min<size_t>(4, n - i)));
  // utf8_first_invalid returns 0 if the first sequence is broken.
  if (valid == 0) invalid_utf8(s, i);
  size_t l = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = l == 2 ? (b & 0x1F) : l == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < l; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
  *len = l;
  return classify(cp);
}

// Calls emit(begin, end) for every match of GPT-2's pattern, left to right:
//   's|'t|'re|'ve|'m|'ll|'d       contractions, tried first at every position
//   | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+   a run of one class, with at most
//                                 one leading U+0020
//   |\s+(?!\S)                    whitespace not followed by a non-space: a run
//                                 up to the end, or all of a run but its last
//                                 character (which then leads the next word)
//   |\s+                          a single whitespace before a non-space
template <typename Emit>
void scan_pieces(std::string_view text, Emit&& emit) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b == '\'' && i + 1 < n) {
      const unsigned char c = s[i + 1];
      if (c == 's' || c == 't' || c == 'm' || c == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const unsigned char c2 = s[i + 2];
        if ((c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    size_t len;
    const Cls c0 = class_at(s, n, i, &len);
    Cls run = c0;
    size_t j = i + len;
    if (b == ' ' && j < n) {  // " ?" before a letter, number or other run
      size_t len1;
      const Cls c1 = class_at(s, n, j, &len1);
      if (c1 != kSpace) {
        run = c1;
        j += len1;
      }
    }
    if (run != kSpace) {
      while (j < n) {
        size_t l;
        if (s[j] < 0x80) {
          if (kAscii.c[s[j]] != run) break;
          ++j;
          continue;
        }
        if (class_at(s, n, j, &l) != run) break;
        j += l;
      }
    } else {
      size_t last = i;  // start of the run's last character
      while (j < n) {
        size_t l;
        if (class_at(s, n, j, &l) != kSpace) break;
        last = j;
        j += l;
      }
      if (j < n && last > i) j = last;
    }
    emit(i, j);
    i = j;
  }
}

// ------------------------------------------------------------- piece cache

// Per thread: piece bytes -> ids, Python's self.cache. Open addressing over
// an arena of keys and values; cleared when full (memory stays bounded on
// any corpus; a clear costs a few re-merges of frequent words).
class PieceCache {
 public:
  static constexpr size_t kSlots = size_t(1) << 18;
  static constexpr size_t kMaxEntries = kSlots / 2;
  static constexpr size_t kMaxPieceBytes = 128;  // longer pieces are not cached

  void reset(uint64_t owner) {
    owner_ = owner;
    slots_.assign(kSlots, Slot{});
    keys_.clear();
    vals_.clear();
    entries_ = 0;
  }
  uint64_t owner() const { return owner_; }

  // Appends the cached ids of `piece` to out; false when absent.
  bool find(std::string_view piece, uint64_t h, std::vector<int32_t>& out) const {
    for (size_t k = h & (kSlots - 1);; k = (k + 1) & (kSlots - 1)) {
      const Slot& sl = slots_[k];
      if (sl.key_len == 0) return false;
      if (sl.hash == h && sl.key_len == piece.size() &&
          std::memcmp(keys_.data() + sl.key_off, piece.data(), piece.size()) == 0) {
        out.insert(out.end(), vals_.begin() + sl.val_off, vals_.begin() + sl.val_off + sl.val_len);
        return true;
      }
    }
  }
  void insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n) {
    if (entries_ >= kMaxEntries) reset(owner_);
    size_t k = h & (kSlots - 1);
    while (slots_[k].key_len != 0) k = (k + 1) & (kSlots - 1);
    slots_[k] = Slot{h, uint32_t(keys_.size()), uint32_t(piece.size()), uint32_t(vals_.size()),
                     uint32_t(n)};
    keys_.append(piece);
    vals_.insert(vals_.end(), ids, ids + n);
    ++entries_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0;  // key_len 0 = empty (pieces are never empty)
    uint32_t val_off = 0, val_len = 0;
  };
  uint64_t owner_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> vals_;
  size_t entries_ = 0;
};

// Distinguishes tokenizer instances for the per-thread caches (an id, not a
// pointer, so a new tokenizer at a reused address never sees stale entries).
std::atomic<uint64_t> g_next_instance{1};

PieceCache& thread_cache(uint64_t owner) {
  thread_local PieceCache cache;
  if (cache.owner() != owner) cache.reset(owner);
  return cache;
}

std::string read_text_file(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  MT_CHECK(in.good(), "cannot open ", flag, " ", path, ": ", std::strerror(errno),
           "; fix: run scripts/fetch_gpt2_tokenizer.sh and pass --vocab-file "
           "data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// ------------------------------------------------------------- merge table

void Gpt2BpeTokenizer::MergeTable::build(const std::vector<std::pair<uint64_t, Merge>>& entries) {
  size_t cap = 16;
  while (cap < entries.size() * 2) cap *= 2;
  keys.assign(cap, 0);
  values.assign(cap, Merge{0, 0});
  mask = cap - 1;
  for (const auto& [key, m] : entries) {
    size_t k = hash_u64(key) & mask;
    while (keys[k] != 0 && keys[k] != key + 1) k = (k + 1) & mask;
    keys[k] = key + 1;
    values[k] = m;  // a repeated pair keeps its last rank, as Python's dict(zip(...))
  }
}

const Gpt2BpeTokenizer::Merge* Gpt2BpeTokenizer::MergeTable::find(int32_t a, int32_t b) const {
  const uint64_t key = (uint64_t(uint32_t(a)) << 32 | uint32_t(b)) + 1;
  for (size_t k = hash_u64(key - 1) & mask;; k = (k + 1) & mask) {
    if (keys[k] == key) return &values[k];
    if (keys[k] == 0) return nullptr;
  }
}

// ------------------------------------------------------------------ loading

Gpt2BpeTokenizer::Gpt2BpeTokenizer(std::string_view vocab_json, std::string_view merges_txt,
                                   std::string_view vocab_source, std::string_view merges_source)
    : instance_id_(g_next_instance.fetch_add(1)) {
  const std::string vsrc(vocab_source), msrc(merges_source);
  char32_t byte_to_cp[256];
  int16_t cp_to_byte[324];
  byte_unicode_tables(byte_to_cp, cp_to_byte);

  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json.begin(), vocab_json.end());
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL("GPT-2 vocabulary ", vsrc, " is not valid JSON (", e.what(),
            "); fix: pass GPT-2's vocab.json (gpt2-vocab.json) as --vocab-file");
  }
  MT_CHECK(vocab.is_object() && !vocab.empty(), "GPT-2 vocabulary ", vsrc,
           " must be a JSON object {\"token\": id, ...}; fix: pass GPT-2's vocab.json as --vocab-file");
  const size_t n = vocab.size();
  token_bytes_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int32_t> id_of_bytes;
  id_of_bytes.reserve(n * 2);
  for (const auto& [sym, jid] : vocab.items()) {
    MT_CHECK(jid.is_number_integer() && jid.get<int64_t>() >= 0 && jid.get<int64_t>() < int64_t(n),
             "GPT-2 vocabulary ", vsrc, ": id of \"", sym, "\" is ", jid.dump(), ", not in [0, ", n,
             ") (ids must be 0..size-1)");
    const auto id = jid.get<int32_t>();
    MT_CHECK(!seen[size_t(id)], "GPT-2 vocabulary ", vsrc, ": id ", id, " is used twice");
    seen[size_t(id)] = true;
    token_bytes_[size_t(id)] = symbol_bytes(sym, cp_to_byte, vsrc);
    id_of_bytes[token_bytes_[size_t(id)]] = id;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of_bytes.find(std::string(1, char(b)));
    MT_CHECK(it != id_of_bytes.end(), "GPT-2 vocabulary ", vsrc, " has no token for byte ", b,
             "; a byte-level BPE needs all 256; fix: pass GPT-2's vocab.json");
    byte_id_[b] = it->second;
  }
  auto eod_it = id_of_bytes.find(std::string(kEodToken));
  MT_CHECK(eod_it != id_of_bytes.end(), "GPT-2 vocabulary ", vsrc, " has no \"",
           std::string(kEodToken), "\" token (Megatron's eod); fix: pass GPT-2's vocab.json");
  eod_ = eod_it->second;

  // Python: open(merges).read().split('\n')[1:-1]: the first line (#version)
  // and whatever follows the last newline are not merges.
  std::vector<std::pair<uint64_t, Merge>> entries;
  std::vector<std::string_view> lines;
  for (size_t start = 0;;) {
    const size_t nl = merges_txt.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back(merges_txt.substr(start));
      break;
    }
    lines.push_back(merges_txt.substr(start, nl - start));
    start = nl + 1;
  }
  for (size_t li = 1; li + 1 < lines.size(); ++li) {
    const int32_t rank = int32_t(li - 1);
    std::vector<std::string_view> parts;
    std::string_view line = lines[li];
    for (size_t p = 0; p < line.size();) {
      while (p < line.size() && std::isspace((unsigned char)line[p])) ++p;
      size_t q = p;
      while (q < line.size() && !std::isspace((unsigned char)line[q])) ++q;
      if (q > p) parts.push_back(line.substr(p, q - p));
      p = q;
    }
    if (parts.empty()) continue;
    MT_CHECK(parts.size() == 2, "GPT-2 merges ", msrc, " line ", li + 1, " holds ", parts.size(),
             " symbols, not 2; fix: pass GPT-2's merges.txt (vocab.bpe) as --merge-file");
    const std::string where = msrc + " line " + std::to_string(li + 1);
    const std::string a = symbol_bytes(parts[0], cp_to_byte, where);
    const std::string b = symbol_bytes(parts[1], cp_to_byte, where);
    auto ia = id_of_bytes.find(a), ib = id_of_bytes.find(b), im = id_of_bytes.find(a + b);
    MT_CHECK(ia != id_of_bytes.end() && ib != id_of_bytes.end() && im != id_of_bytes.end(),
             "GPT-2 merges ", where, " (\"", std::string(lines[li]),
             "\"): the symbols or their merge are not in ", vsrc,
             "; fix: pass the vocab.json and merges.txt of the same tokenizer");
    entries.push_back({uint64_t(uint32_t(ia->second)) << 32 | uint32_t(ib->second),
                       Merge{rank, im->second}});
  }
  merges_.build(entries);
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::load(const std::string& vocab_file, const std::string& merge_file) {
  MT_CHECK(!vocab_file.empty(), "GPT2BPETokenizer needs --vocab-file; fix: run "
           "scripts/fetch_gpt2_tokenizer.sh and pass --vocab-file data/gpt2/gpt2-vocab.json");
  MT_CHECK(!merge_file.empty(), "GPT2BPETokenizer needs --merge-file; fix: run "
           "scripts/fetch_gpt2_tokenizer.sh and pass --merge-file data/gpt2/gpt2-merges.txt");
  const std::string vocab = read_text_file(vocab_file, "--vocab-file");
  const std::string merges = read_text_file(merge_file, "--merge-file");
  Gpt2BpeTokenizer t(vocab, merges, vocab_file, merge_file);
  t.vocab_file_ = vocab_file;
  t.merge_file_ = merge_file;
  t.vocab_sha256_ = sha256_hex(vocab);
  t.merge_sha256_ = sha256_hex(merges);
  return t;
}

// ----------------------------------------------------------------- encoding

void Gpt2BpeTokenizer::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  // Symbols as ids; each round finds the lowest-ranked adjacent pair and
  // merges all its occurrences left to right (encoder.py's bpe()).
  int32_t small[64];
  std::vector<int32_t> big;
  int32_t* sym = small;
  if (piece.size() > 64) {
    big.resize(piece.size());
    sym = big.data();
  }
  size_t n = piece.size();
  for (size_t i = 0; i < n; ++i) sym[i] = byte_id_[(unsigned char)piece[i]];
  while (n > 1) {
    int32_t best_rank = INT32_MAX, a = -1, b = -1, merged = -1;
    for (size_t i = 0; i + 1 < n; ++i) {
      const Merge* m = merges_.find(sym[i], sym[i + 1]);
      if (m != nullptr && m->rank < best_rank) {
        best_rank = m->rank;
        a = sym[i];
        b = sym[i + 1];
        merged = m->merged;
      }
    }
    if (merged < 0) break;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
      if (i + 1 < n && sym[i] == a && sym[i + 1] == b) {
        sym[j++] = merged;
        i += 2;
      } else {
        sym[j++] = sym[i++];
      }
    }
    n = j;
  }
  out.insert(out.end(), sym, sym + n);
}

void Gpt2BpeTokenizer::tokenize_append(std::string_view text, std::vector<int32_t>& out) const {
  PieceCache& cache = thread_cache(instance_id_);
  scan_pieces(text, [&](size_t begin, size_t end) {
    const std::string_view piece = text.substr(begin, end - begin);
    if (piece.size() == 1) {
      out.push_back(byte_id_[(unsigned char)piece[0]]);
      return;
    }
    if (piece.size() > PieceCache::kMaxPieceBytes) {
      bpe(piece, out);
      return;
    }
    const uint64_t h = hash_bytes(piece);
    if (cache.find(piece, h, out)) return;
    const size_t before = out.size();
    bpe(piece, out);
    cache.insert(piece, h, out.data() + before, out.size() - before);
  });
}

std::vector<std::string_view> Gpt2BpeTokenizer::pre_tokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  scan_pieces(text, [&](size_t b, size_t e) { pieces.push_back(text.substr(b, e - b)); });
  return pieces;
}

// ----------------------------------------------------------------- decoding

bool Gpt2BpeTokenizer::append_token_bytes(int32_t id, std::string& out) const {
  MT_CHECK(id >= 0 && id < int32_t(token_bytes_.size()), "token id ", id,
           " is outside the GPT-2 vocabulary of size ", token_bytes_.size(),
           "; fix: decode with the tokenizer the ids were made with");
  out += token_bytes_[size_t(id)];
  return true;
}

std::string Gpt2BpeTokenizer::detokenize(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) append_token_bytes(id, bytes);
  std::string text;
  text.reserve(bytes.size());
  utf8_decode_replace(bytes, text, /*final=*/true);
  return text;
}

nlohmann::json Gpt2BpeTokenizer::describe() const {
  nlohmann::json j = Tokenizer::describe();
  j["vocab_file"] = {{"path", vocab_file_}, {"sha256", vocab_sha256_}};
  j["merge_file"] = {{"path", merge_file_}, {"sha256", merge_sha256_}};
  return j;
}

}  // namespace mt
