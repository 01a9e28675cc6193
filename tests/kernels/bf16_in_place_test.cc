// In-place fp32 ↔ bf16 of a gradient bucket (kernels/bf16_in_place.h): rounding
// gives bf16_from_f32 of every element (ties to even, NaN, overflow) at byte
// 2i, widening gives back f32_from_bf16 · scale at byte 4i, for odd and even
// lengths, below and above the one-thread size, on 1 and 2 OpenMP threads;
// a bucket inside a larger buffer leaves its neighbours' bytes alone, and a
// piece [begin, end) widens only its own elements (the reduce-scatter case).
#include "kernels/bf16_in_place.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/precision.h"

namespace mt {
namespace bf16_in_place_test {

// Values that end on every rounding case: ties to even down and up (the
// low 16 bits exactly 0x8000 with an even / odd bf16 mantissa), just above
// and below ties, negative ties, NaN, ±inf, fp32 values that round above the
// bf16 range, subnormals, and then pseudo-random floats.
float test_value(int64_t i) {
  switch (i % 16) {
    case 0: return 1.f + 0x1p-8f;                // tie: down to 1 (even)
    case 1: return 1.f + 0x1p-7f + 0x1p-8f;      // tie: up to 1 + 2^-6
    case 2: return -(3.f + 0x1p-7f);             // tie, negative: down in magnitude to -3
    case 3: return 1.f + 0x1p-8f + 0x1p-20f;     // just above a tie: up
    case 4: return 1.f + 0x1p-8f - 0x1p-20f;     // just below: down
    case 5: return std::bit_cast<float>(0x7F7FFFFFu);  // FLT_MAX: above bf16's range → inf
    case 6: return NAN;
    case 7: return -INFINITY;
    case 8: return std::bit_cast<float>(0x00018000u);  // subnormal tie: up (odd 0x0001 → 0x0002)
    default: {
      uint32_t h = uint32_t(i) * 2654435761u;
      h ^= h >> 15;
      h *= 2246822519u;
      return std::ldexp(float(int32_t(h)) / 2147483648.f, int(h % 20) - 10);
    }
  }
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

struct Threads {
  explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
  int saved;
};

// Lengths: empty, tiny, odd, one local block and around it, the one-thread
// size (2^15) and around it, and several OpenMP rounds (odd).
const int64_t kLengths[] = {0, 1, 2, 3, 63, 64, 65, 1001, 32767, 32768, 32769, 100'003, 1'000'001};

class GradBf16 : public ::testing::TestWithParam<int> {};  // param: OpenMP threads

TEST_P(GradBf16, RoundThenWidenGivesTheBf16ValuesAtTheirOffsets) {
  const Threads threads(GetParam());
  for (int64_t n : kLengths) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = test_value(i);
    const std::vector<float> orig = x;
    uint16_t* h = round_to_bf16_in_place(x.data(), n);
    ASSERT_EQ(static_cast<void*>(h), static_cast<void*>(x.data()));
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (h[i] != bf16_from_f32(orig[size_t(i)]) && bad++ < 5)
        ADD_FAILURE() << "bf16[" << i << "] = " << h[i] << ", want "
                      << bf16_from_f32(orig[size_t(i)]) << " (of " << orig[size_t(i)] << ")";
    // Bytes [2n, 4n) (floats [n/2, n) when n is even) were read, never written.
    for (int64_t i = (n + 1) / 2; i < n; ++i)
      if (!same_bits(x[size_t(i)], orig[size_t(i)]) && bad++ < 5)
        ADD_FAILURE() << "float " << i << " above the bf16 half changed";
    EXPECT_EQ(bad, 0);

    const float scale = 0.5f;
    widen_bf16_in_place(x.data(), 0, n, scale);
    for (int64_t i = 0; i < n; ++i) {
      const float want = f32_from_bf16(bf16_from_f32(orig[size_t(i)])) * scale;
      if (!same_bits(x[size_t(i)], want) && !(std::isnan(want) && std::isnan(x[size_t(i)])) &&
          bad++ < 5)
        ADD_FAILURE() << "x[" << i << "] = " << x[size_t(i)] << ", want " << want;
    }
    EXPECT_EQ(bad, 0);
  }
  // Ties to even, spelled out.
  float t[3] = {1.f + 0x1p-8f, 1.f + 0x1p-7f + 0x1p-8f, -(3.f + 0x1p-7f)};
  round_to_bf16_in_place(t, 3);
  widen_bf16_in_place(t, 0, 3);
  EXPECT_EQ(t[0], 1.f);
  EXPECT_EQ(t[1], 1.f + 0x1p-6f);
  EXPECT_EQ(t[2], -3.f);
}

// Two buckets side by side in one buffer, as GradBuckets has them: rounding
// and widening one never touches the other's bytes; then a piece [b, e) of
// a bucket (this rank's share of a reduce-scatter, the bf16 sum at its own
// element offsets) widens into floats [b, e) and nothing else.
TEST_P(GradBf16, BucketBoundariesAndPieces) {
  const Threads threads(GetParam());
  for (int64_t split : {int64_t(1001), int64_t(70'001)}) {
    const int64_t n = 2 * split + 335;  // bucket A: [0, split), bucket B: [split, n)
    SCOPED_TRACE("split " + std::to_string(split));
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = test_value(i + 9);
    const std::vector<float> orig = x;
    float* b = x.data() + split;
    const int64_t nb = n - split;
    const uint16_t* hb = round_to_bf16_in_place(b, nb);
    for (int64_t i = 0; i < split; ++i) ASSERT_TRUE(same_bits(x[size_t(i)], orig[size_t(i)])) << i;
    // A piece in the middle of bucket B: floats [lo, hi) get the widened
    // bf16 elements [lo, hi); every other byte of the buffer stays.
    const int64_t lo = nb / 3 + 1, hi = 2 * nb / 3 + 1;
    const std::vector<uint16_t> bf16(hb, hb + nb);
    std::vector<unsigned char> before(size_t(4 * n));
    std::memcpy(before.data(), x.data(), before.size());
    widen_bf16_in_place(b, lo, hi, 0.25f);
    for (int64_t i = lo; i < hi; ++i)
      ASSERT_TRUE(same_bits(b[i], f32_from_bf16(bf16[size_t(i)]) * 0.25f)) << "piece element " << i;
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(x.data());
    for (int64_t k = 0; k < 4 * n; ++k) {
      if (k < 4 * (split + lo) || k >= 4 * (split + hi)) {
        ASSERT_EQ(bytes[k], before[size_t(k)]) << "byte " << k << " outside the piece's floats";
      }
    }
    // Bucket A, the whole of it: B's floats stay as they are.
    const std::vector<float> after_b(x.begin() + split, x.end());
    round_to_bf16_in_place(x.data(), split);
    widen_bf16_in_place(x.data(), 0, split, 1.f);
    for (int64_t i = 0; i < split; ++i)
      ASSERT_TRUE(same_bits(x[size_t(i)], f32_from_bf16(bf16_from_f32(orig[size_t(i)])))) << i;
    for (int64_t i = 0; i < nb; ++i) ASSERT_TRUE(same_bits(b[i], after_b[size_t(i)])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(OmpThreads, GradBf16, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "Threads" + std::to_string(i.param);
                         });

}  // namespace bf16_in_place_test
}  // namespace mt
