// Counter-based RNG (Philox4x32-10, Salmon et al. 2011). Every random number in
// megatron.cpp is a pure function of (key, counter): parameters are keyed by
// (seed, parameter name) and indexed by global element index; dropout masks by
// (seed, site) with counter (global element index, iteration). So any shard
// of any layout draws exactly the numbers of the one-rank run.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace mt {

struct Philox4 {
  uint32_t v[4];
};

inline Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                             uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(kM0) * c0;
    const uint64_t p1 = uint64_t(kM1) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// 64-bit FNV-1a: stable across platforms and runs (std::hash is not).
inline uint64_t fnv1a64(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

// A stream of random numbers: key = hash(seed, name); counter words 2,3 = a
// caller-chosen 64-bit "step" (iteration for dropout, 0 for init).
struct RngStream {
  uint32_t k0 = 0, k1 = 0;
  uint64_t step = 0;

  static RngStream make(uint64_t seed, std::string_view name, uint64_t step = 0) {
    uint64_t h = fnv1a64(name, 0xcbf29ce484222325ull ^ (seed * 0x9E3779B97F4A7C15ull));
    return {uint32_t(h), uint32_t(h >> 32), step};
  }
  // Four 32-bit words for block `block` (elements 4*block .. 4*block+3).
  Philox4 block(uint64_t block) const {
    return philox4x32_10(uint32_t(block), uint32_t(block >> 32), uint32_t(step),
                         uint32_t(step >> 32), k0, k1);
  }
  // Uniform in [0, 1) with 24 bits, for global element `index`.
  float uniform(uint64_t index) const {
    return float(block(index >> 2).v[index & 3] >> 8) * (1.0f / 16777216.0f);
  }
  // Standard normal for global element `index` (Box-Muller on a pair of words).
  float normal(uint64_t index) const {
    const Philox4 r = block(index >> 1);
    const int o = int(index & 1) * 2;
    const double u1 = (double(r.v[o]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
    const double u2 = double(r.v[o + 1]) * (1.0 / 4294967296.0);
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
};

}  // namespace mt
