// Communicator's bf16 reductions (--grad-reduce-in-bf16): all-reduce and
// in-place reduce-scatter, blocking and non-blocking, small buffers, odd
// sizes, empty chunks and buffers above kReduceChunkBytes (the blocking forms
// then go in pieces, the reduce-scatter as a chunked all-reduce).
// Each rank knows every rank's input (a function of rank and index), so it
// can check the result:
//   - integers in [-20, 20]: every partial sum is exact in bf16 (8
//     significant bits), so the result is the exact sum whatever tree MPI uses;
//   - random bf16 values: over 2 ranks exactly bf16(a0 + a1) (one pairwise
//     sum); over N ranks within the N - 1 roundings of the partial sums,
//     each at most half an ulp, 2^-8 relative (bf16 has 8 significant bits),
//     of a value below sum |a_r|.
// CTest runs it on 1, 2 and 3 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/precision.h"

namespace mt {
namespace communicator_bf16_test {

enum class Values { kIntegers, kRandom };

// Input of `rank` at element i, as bf16.
uint16_t input(Values v, int rank, int64_t i) {
  uint64_t h = uint64_t(i) * 0x9E3779B97F4A7C15ull + uint64_t(rank + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  if (v == Values::kIntegers) return bf16_from_f32(float(int64_t(h % 41) - 20));
  // Sign, a mantissa of 7 random bits, exponents 2^-4 .. 2^3.
  const uint32_t sign = uint32_t(h >> 63) << 15, exp = 127 - 4 + uint32_t((h >> 8) % 8);
  return uint16_t(sign | (exp << 7) | uint32_t(h & 0x7F));
}

// Checks element i of a bf16 sum over the group against the inputs.
void expect_sum(Values v, int size, int64_t i, uint16_t got, int* bad) {
  double exact = 0, magnitude = 0;
  for (int r = 0; r < size; ++r) {
    const double x = f32_from_bf16(input(v, r, i));
    exact += x;
    magnitude += std::abs(x);
  }
  const double g = f32_from_bf16(got);
  bool ok;
  if (v == Values::kIntegers || size == 1) {
    ok = g == exact;
  } else if (size == 2) {
    ok = got == bf16_from_f32(f32_from_bf16(input(v, 0, i)) + f32_from_bf16(input(v, 1, i)));
  } else {
    ok = std::abs(g - exact) <= double(size - 1) * std::ldexp(magnitude, -8);
  }
  if (!ok && (*bad)++ < 5)
    ADD_FAILURE() << "element " << i << ": got " << g << ", exact sum " << exact << " over "
                  << size << " ranks";
}

// The pieces of the distributed optimizer's buckets: n rounded up to a
// multiple of 16 · size, cut into equal pieces, the last ones short or empty.
ChunkSplit pieces(int64_t n, int size) {
  const int64_t unit = 16 * int64_t(size), piece = (n + unit - 1) / unit * unit / size;
  std::vector<int64_t> counts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) counts[size_t(r)] = std::clamp<int64_t>(n - r * piece, 0, piece);
  return chunk_split(counts);
}

const int64_t kSizes[] = {1, 5, 1001, 3'000'001};  // the last: 6 MB of bf16, above 4 MB

class CommunicatorBf16 : public ::testing::TestWithParam<bool> {};  // param: non-blocking

TEST_P(CommunicatorBf16, AllReduceEqualsTheRoundedSums) {
  const Communicator world = Communicator::world();
  for (Values v : {Values::kIntegers, Values::kRandom})
    for (int64_t n : kSizes) {
      SCOPED_TRACE("n " + std::to_string(n) + (v == Values::kRandom ? " random" : " integers"));
      std::vector<uint16_t> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = input(v, world.rank(), i);
      if (GetParam())
        world.start_all_reduce_sum_bf16(x.data(), n).wait();
      else
        world.all_reduce_sum_bf16(x.data(), n);
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) expect_sum(v, world.size(), i, x[size_t(i)], &bad);
      EXPECT_EQ(bad, 0);
    }
}

TEST_P(CommunicatorBf16, ReduceScatterLeavesTheRoundedSumInThisRanksPiece) {
  const Communicator world = Communicator::world();
  for (Values v : {Values::kIntegers, Values::kRandom})
    for (int64_t n : kSizes) {
      SCOPED_TRACE("n " + std::to_string(n) + (v == Values::kRandom ? " random" : " integers"));
      const ChunkSplit split = pieces(n, world.size());
      std::vector<uint16_t> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = input(v, world.rank(), i);
      if (GetParam())
        world.start_reduce_scatter_sum_bf16_in_place(x.data(), split).wait();
      else
        world.reduce_scatter_sum_bf16_in_place(x.data(), split);
      const int64_t b = split.displs[size_t(world.rank())];
      const int64_t e = b + split.counts[size_t(world.rank())];
      int bad = 0;
      for (int64_t i = b; i < e; ++i) expect_sum(v, world.size(), i, x[size_t(i)], &bad);
      EXPECT_EQ(bad, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Calls, CommunicatorBf16, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("NonBlocking") : std::string("Blocking");
                         });

}  // namespace communicator_bf16_test
}  // namespace mt
