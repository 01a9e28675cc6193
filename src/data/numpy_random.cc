#include "data/numpy_random.h"

#include "core/error.h"

namespace mt {

namespace {

// SeedSequence's constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu, kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu, kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

// hashmix: the multiplier advances with every call (in-out).
uint32_t hashmix(uint32_t value, uint32_t* hash_const) {
  value ^= *hash_const;
  *hash_const *= kMultA;
  value *= *hash_const;
  return value ^ (value >> kXShift);
}

uint32_t mix(uint32_t x, uint32_t y) {
  const uint32_t r = kMixMultL * x - kMixMultR * y;
  return r ^ (r >> kXShift);
}

// PCG's 128-bit default multiplier.
constexpr unsigned __int128 kPcgMultiplier =
    (unsigned __int128)0x2360ed051fc65da4ull << 64 | 0x4385df649fccf645ull;

}  // namespace

std::vector<uint32_t> seed_sequence_state(uint64_t entropy, int64_t n_words) {
  // The seed as 32-bit words, least significant first (0 is one word, 0).
  std::vector<uint32_t> words;
  do {
    words.push_back(uint32_t(entropy));
    entropy >>= 32;
  } while (entropy != 0);
  // mix_entropy: the words into the pool, then every pool word into every other.
  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i)
    pool[i] = hashmix(size_t(i) < words.size() ? words[size_t(i)] : 0u, &hash_const);
  for (int src = 0; src < kPoolSize; ++src)
    for (int dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &hash_const));
  for (size_t src = kPoolSize; src < words.size(); ++src)
    for (int dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = mix(pool[dst], hashmix(words[src], &hash_const));
  // generate_state: the pool cycled and hashed out.
  std::vector<uint32_t> out(static_cast<size_t>(n_words));
  uint32_t gen_const = kInitB;
  for (int64_t i = 0; i < n_words; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= gen_const;
    gen_const *= kMultB;
    v *= gen_const;
    out[size_t(i)] = v ^ (v >> kXShift);
  }
  return out;
}

NumpyPcg64::NumpyPcg64(uint64_t seed) {
  const std::vector<uint32_t> w = seed_sequence_state(seed, 8);
  auto u64 = [&](int i) { return uint64_t(w[size_t(2 * i)]) | uint64_t(w[size_t(2 * i + 1)]) << 32; };
  const unsigned __int128 init_state = (unsigned __int128)u64(0) << 64 | u64(1);
  const unsigned __int128 init_seq = (unsigned __int128)u64(2) << 64 | u64(3);
  // pcg_setseq_128_srandom_r
  state_ = 0;
  inc_ = init_seq << 1 | 1;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += init_state;
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyPcg64::next_uint64() {
  state_ = state_ * kPcgMultiplier + inc_;
  const uint64_t x = uint64_t(state_ >> 64) ^ uint64_t(state_);
  const unsigned rot = unsigned(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t NumpyPcg64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = uint32_t(next >> 32);
  return uint32_t(next);
}

void numpy_integers_int32(NumpyPcg64& rng, int32_t low, int32_t high, std::span<int32_t> out) {
  MT_CHECK(low < high, "integers(low=", low, ", high=", high, "): low must be below high");
  const uint32_t range = uint32_t(int64_t(high) - 1 - low);  // draws in [0, range]
  const uint32_t off = uint32_t(low);
  for (int32_t& v : out) {
    uint32_t draw;
    if (range == 0) {  // numpy draws nothing (high - low = 1 cannot exceed 2^32 - 1 here)
      draw = 0;
    } else {
      const uint32_t excl = range + 1;
      uint64_t m = uint64_t(rng.next_uint32()) * excl;
      uint32_t leftover = uint32_t(m);
      if (leftover < excl) {
        const uint32_t threshold = (0xffffffffu - range) % excl;  // 2^32 mod excl
        while (leftover < threshold) {
          m = uint64_t(rng.next_uint32()) * excl;
          leftover = uint32_t(m);
        }
      }
      draw = uint32_t(m >> 32);
    }
    v = int32_t(off + draw);
  }
}

}  // namespace mt
