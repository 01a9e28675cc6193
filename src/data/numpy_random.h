// numpy's default random stream, as Megatron's MockGPTLowLevelDataset draws
// its document lengths with it: numpy.random.default_rng(seed) is
// Generator(PCG64(SeedSequence(seed))), and Generator.integers(low, high,
// size, dtype=numpy.int32) draws with Lemire's bounded method. Own code after
// the published algorithms (numpy 1.17+, unchanged since; checked against
// python3-numpy 1.24 in tests/data/numpy_random_test.cc):
// - SeedSequence (M. O'Neill's seed_seq_fe, numpy/random/bit_generator.pyx):
//   the seed's 32-bit words are hashed into a pool of 4 words, which
//   generate_state(n) hashes out again; PCG64 takes 4 uint64 (8 words, two
//   per uint64, low word first): state = w0:w1, increment = w2:w3.
// - PCG64 (O'Neill 2014, pcg_setseq_128_xsl_rr_64): a 128-bit LCG, output
//   rotr64(hi ^ lo, state >> 122) after each step; a 32-bit draw uses the low
//   half of a 64-bit output and keeps the high half for the next draw.
// - Bounded 32-bit integers in [0, rng] (Lemire 2019, numpy's
//   buffered_bounded_lemire_uint32): m = u32 * (rng + 1); the high word is
//   the draw, rejecting low words below 2^32 mod (rng + 1).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace mt {

// numpy.random.SeedSequence(entropy).generate_state(n_words, numpy.uint32)
// for a non-negative integer seed and no spawn key.
std::vector<uint32_t> seed_sequence_state(uint64_t entropy, int64_t n_words);

// numpy.random.PCG64(seed) (seeded through SeedSequence).
class NumpyPcg64 {
 public:
  explicit NumpyPcg64(uint64_t seed);
  uint64_t next_uint64();
  uint32_t next_uint32();

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// numpy.random.default_rng(seed).integers(low, high, size=out.size(),
// dtype=numpy.int32): out[i] in [low, high), drawn in order from `rng`.
// Checks low < high.
void numpy_integers_int32(NumpyPcg64& rng, int32_t low, int32_t high, std::span<int32_t> out);

}  // namespace mt
