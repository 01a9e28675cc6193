#include "data/numpy_random.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

// Expected numbers from python3-numpy 1.24.2 (Debian 12), e.g.
//   numpy.random.SeedSequence(0).generate_state(8)
//   numpy.random.PCG64(0).random_raw(4)
//   numpy.random.default_rng(0).integers(-2**31, 2**30, size=8, dtype=numpy.int32)

namespace mt {
namespace numpy_random_test {

TEST(NumpyRandom, SeedSequenceStateOfZero) {
  const std::vector<uint32_t> want = {0xb0f478be, 0xdb2cd7e7, 0x2c71ba49, 0xabf4641a,
                                      0x9d7b8d41, 0x20c6ed6d, 0x223c39d4, 0x2c4099de};
  EXPECT_EQ(seed_sequence_state(0, 8), want);
}

TEST(NumpyRandom, SeedSequenceStateOfMultiWordSeeds) {
  // Two 32-bit words of entropy (2^40 + 5 and 2^64 - 1).
  EXPECT_EQ(seed_sequence_state((uint64_t(1) << 40) + 5, 4),
            (std::vector<uint32_t>{0xe08a170b, 0xdae41755, 0x7ecdcb2c, 0x8415abe8}));
  EXPECT_EQ(seed_sequence_state(~uint64_t(0), 4),
            (std::vector<uint32_t>{0x928cad0d, 0xaebca151, 0x8638dc7a, 0x119c3044}));
}

TEST(NumpyRandom, Pcg64RawOutputs) {
  NumpyPcg64 rng(0);
  const uint64_t want[] = {0xa30febcfd9c2825full, 0x4510bdf882d9d721ull, 0xa7d3da94ecde8b8ull,
                           0x43b27b61342f01dull};
  for (uint64_t w : want) EXPECT_EQ(rng.next_uint64(), w);
}

TEST(NumpyRandom, Pcg64Uint32TakesTheLowHalfFirst) {
  NumpyPcg64 rng(0);
  EXPECT_EQ(rng.next_uint32(), 0xd9c2825fu);
  EXPECT_EQ(rng.next_uint32(), 0xa30febcfu);
  EXPECT_EQ(rng.next_uint32(), 0x82d9d721u);
}

// Megatron's mock document lengths: default_rng(0).integers(1, 4096, 100000, int32).
TEST(NumpyRandom, MockDocumentLengths) {
  NumpyPcg64 rng(0);
  std::vector<int32_t> got(16);
  numpy_integers_int32(rng, 1, 4096, got);
  const std::vector<int32_t> want = {3484, 2609, 2094, 1105, 1261, 168,  309,  68,
                                     718,  3331, 2660, 3738, 2063, 2485, 3976, 2988};
  EXPECT_EQ(got, want);
}

// A range of 3 * 2^30 rejects a quarter of the draws: the rejection path.
TEST(NumpyRandom, BoundedIntegersWithRejections) {
  NumpyPcg64 rng(0);
  std::vector<int32_t> got(8);
  numpy_integers_int32(rng, INT32_MIN, 1 << 30, got);
  const std::vector<int32_t> want = {592568775,   -95686437,   -500997800,  -2015498690,
                                     -1905118187, -2094244408, -1582908180, -55569094};
  EXPECT_EQ(got, want);
}

// integers(5, 6) draws nothing: the next call sees the untouched stream.
TEST(NumpyRandom, SingleValueRangeDrawsNothing) {
  NumpyPcg64 rng(7);
  std::vector<int32_t> one(3), digits(5);
  numpy_integers_int32(rng, 5, 6, one);
  numpy_integers_int32(rng, 0, 10, digits);
  EXPECT_EQ(one, (std::vector<int32_t>{5, 5, 5}));
  EXPECT_EQ(digits, (std::vector<int32_t>{9, 6, 6, 8, 5}));
}

TEST(NumpyRandom, EmptyRangeRefused) {
  NumpyPcg64 rng(0);
  std::vector<int32_t> out(1);
  EXPECT_THROW(numpy_integers_int32(rng, 3, 3, out), Error);
}

}  // namespace numpy_random_test
}  // namespace mt
