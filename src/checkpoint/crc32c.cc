#include "checkpoint/crc32c.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define MT_CRC32C_X86 1
#endif

namespace mt {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

// Slicing-by-8: table[k][b] is the CRC register after byte b followed by k
// zero bytes, so eight bytes are folded with eight lookups.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}
constexpr auto kTables = make_tables();

// a(x) * b(x) mod P(x) in the reflected representation (bit 31 is x^0).
uint32_t mul_mod_p(uint32_t a, uint32_t b) {
  uint32_t prod = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) prod ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return prod;
}

// x^(2^k) mod P for k = 0..63.
std::array<uint32_t, 64> make_powers() {
  std::array<uint32_t, 64> p{};
  uint32_t x = 1u << 30;  // x^1
  for (uint32_t& e : p) {
    e = x;
    x = mul_mod_p(x, x);
  }
  return p;
}

// x^(8 * bytes) mod P: the factor that moves a CRC register past `bytes` zero bytes.
uint32_t shift_factor(uint64_t bytes) {
  static const std::array<uint32_t, 64> powers = make_powers();
  uint32_t f = 1u << 31;  // x^0
  for (int k = 3; bytes != 0 && k < 64; bytes >>= 1, ++k)
    if (bytes & 1) f = mul_mod_p(powers[size_t(k)], f);
  return f;
}

uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian host (the CRC is defined on bytes in order)
}

}  // namespace

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t v = load64(p) ^ c;
    c = kTables[7][v & 0xff] ^ kTables[6][(v >> 8) & 0xff] ^ kTables[5][(v >> 16) & 0xff] ^
        kTables[4][(v >> 24) & 0xff] ^ kTables[3][(v >> 32) & 0xff] ^
        kTables[2][(v >> 40) & 0xff] ^ kTables[1][(v >> 48) & 0xff] ^ kTables[0][v >> 56];
  }
  for (; n > 0; --n) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return ~c;
}

#ifdef MT_CRC32C_X86

bool crc32c_hardware_available() {
  static const bool ok = __builtin_cpu_supports("sse4.2");
  return ok;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_extend_hardware(uint32_t crc, const void* data,
                                                                  size_t n) {
  // Each of three streams hashes its own kBlock bytes of a 3 * kBlock span;
  // the registers are then joined: reg(A B) = reg(A) * x^(8|B|) + reg0(B).
  constexpr size_t kBlock = 4096;
  static const uint32_t kShift = shift_factor(kBlock);
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t c0 = uint32_t(~crc);
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n) c0 = _mm_crc32_u8(uint32_t(c0), *p++);
  for (; n >= 3 * kBlock; n -= 3 * kBlock, p += 3 * kBlock) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      c0 = _mm_crc32_u64(c0, load64(p + i));
      c1 = _mm_crc32_u64(c1, load64(p + kBlock + i));
      c2 = _mm_crc32_u64(c2, load64(p + 2 * kBlock + i));
    }
    c0 = mul_mod_p(kShift, uint32_t(c0)) ^ uint32_t(c1);
    c0 = mul_mod_p(kShift, uint32_t(c0)) ^ uint32_t(c2);
  }
  for (; n >= 8; n -= 8, p += 8) c0 = _mm_crc32_u64(c0, load64(p));
  for (; n > 0; --n) c0 = _mm_crc32_u8(uint32_t(c0), *p++);
  return ~uint32_t(c0);
}

#else

bool crc32c_hardware_available() { return false; }
uint32_t crc32c_extend_hardware(uint32_t crc, const void* data, size_t n) {
  return crc32c_extend_portable(crc, data, n);
}

#endif

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  return crc32c_hardware_available() ? crc32c_extend_hardware(crc, data, n)
                                     : crc32c_extend_portable(crc, data, n);
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // The pre- and post-inversions cancel (as for zlib's crc32_combine).
  return mul_mod_p(shift_factor(len_b), crc_a) ^ crc_b;
}

uint32_t crc32c_parallel(const void* data, size_t n) {
  constexpr size_t kPiece = size_t(4) << 20;
  const int64_t pieces = int64_t((n + kPiece - 1) / kPiece);
  if (pieces <= 1 || omp_get_max_threads() == 1 || omp_in_parallel()) return crc32c(data, n);
  const unsigned char* p = static_cast<const unsigned char*>(data);
  std::vector<uint32_t> crcs(static_cast<size_t>(pieces));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t b = size_t(i) * kPiece;
    crcs[size_t(i)] = crc32c(p + b, std::min(kPiece, n - b));
  }
  uint32_t crc = crcs[0];
  for (int64_t i = 1; i < pieces; ++i) {
    const size_t b = size_t(i) * kPiece;
    crc = crc32c_combine(crc, crcs[size_t(i)], std::min(kPiece, n - b));
  }
  return crc;
}

std::string crc32c_hex(uint32_t crc) {
  static const char* digits = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, crc >>= 4) s[size_t(i)] = digits[crc & 0xf];
  return s;
}

bool crc32c_from_hex(const std::string& s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char ch : s) {
    int d;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    else return false;
    v = (v << 4) | uint32_t(d);
  }
  *out = v;
  return true;
}

}  // namespace mt
