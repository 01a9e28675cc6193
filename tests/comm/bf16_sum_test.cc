// The bf16 sum of --grad-reduce-in-bf16 (dist/bf16_sum.h): each pairwise sum
// is the exact sum of the two bf16 values rounded once to bf16, nearest with
// ties to even — checked against an independent rounding in double, on
// values chosen to land on ties, and through MPI as the registered MPI_Op
// (MPI_Reduce_local: the op as MPI calls it, no communication).
#include "comm/bf16_sum.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mt {
namespace bf16_sum_test {

uint16_t bits_of(float x) { return uint16_t(std::bit_cast<uint32_t>(x) >> 16); }  // exact for bf16 values
float value_of(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// bf16 nearest to the finite double s (exactly representable in float here),
// ties to even, written without the bias trick of bf16_from_f32: the two bf16
// neighbours by truncation, then the closer one.
uint16_t reference_round(double s) {
  const uint32_t u = std::bit_cast<uint32_t>(float(s));
  EXPECT_EQ(double(float(s)), s) << "the sum of two bf16 values should be exact in fp32";
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);  // towards zero / away from zero
  const double dlo = std::abs(s - double(value_of(lo))), dhi = std::abs(double(value_of(hi)) - s);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) == 0 ? lo : hi;  // tie: the even mantissa
}

TEST(Bf16Sum, TiesGoToEven) {
  // ulp(1) in bf16 is 2^-7: 1 + 2^-8 is half-way between 1 and 1 + 2^-7.
  const float a[] = {1.f, 1.f + 0x1p-7f, -1.f, 256.f, 1.f, 0x1p-130f};
  const float b[] = {0x1p-8f, 0x1p-8f, -0x1p-8f, 1.f, 0x1p-9f, 0x1p-130f};
  const float want[] = {1.f,            // tie, 1 is even
                        1.f + 0x1p-6f,  // tie, 1 + 2^-7 is odd: up
                        -1.f,           // the same tie, negative
                        256.f,          // 257 is a tie between 256 and 258: 256 is even
                        1.f,            // below the tie
                        0x1p-129f};     // subnormal bf16 sum, exact
  for (size_t i = 0; i < std::size(a); ++i) {
    uint16_t x = bits_of(a[i]);
    const uint16_t y = bits_of(b[i]);
    bf16_sum_into(&x, &y, 1);
    EXPECT_EQ(value_of(x), want[i]) << a[i] << " + " << b[i];
  }
}

TEST(Bf16Sum, InfinityNanAndOverflow) {
  const float big = value_of(0x7F7F);  // largest finite bf16
  uint16_t x[] = {bits_of(big), bits_of(INFINITY), bits_of(NAN), bits_of(-big)};
  const uint16_t y[] = {bits_of(big), bits_of(1.f), bits_of(1.f), bits_of(-big)};
  bf16_sum_into(x, y, 4);
  EXPECT_EQ(value_of(x[0]), INFINITY);
  EXPECT_EQ(value_of(x[1]), INFINITY);
  EXPECT_TRUE(std::isnan(value_of(x[2])));
  EXPECT_EQ(value_of(x[3]), -INFINITY);
}

// Random bf16 pairs of mixed signs and magnitudes (exponents up to 2^10
// apart, so the fp32 sum is exact), an odd count: every sum equals the
// reference rounding, directly and through the MPI_Op.
TEST(Bf16Sum, RandomPairsMatchTheReferenceDirectlyAndAsMpiOp) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mant(-2.f, 2.f);
  std::uniform_int_distribution<int> expo(-5, 5);
  auto random_bf16 = [&] {  // a float truncated to its upper 16 bits: a bf16 value
    return uint16_t(std::bit_cast<uint32_t>(std::ldexp(mant(gen), expo(gen))) >> 16);
  };
  const int n = 10'001;
  std::vector<uint16_t> a(n), b(n), want(n);
  for (size_t i = 0; i < size_t(n); ++i) {
    a[i] = random_bf16();
    b[i] = random_bf16();
    want[i] = reference_round(double(value_of(a[i])) + double(value_of(b[i])));
  }
  std::vector<uint16_t> direct = a;
  bf16_sum_into(direct.data(), b.data(), n);
  std::vector<uint16_t> via_mpi = a;
  ASSERT_EQ(MPI_Reduce_local(b.data(), via_mpi.data(), n, MPI_UINT16_T, bf16_sum_op()),
            MPI_SUCCESS);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (direct[size_t(i)] != want[size_t(i)] && bad++ < 5)
      ADD_FAILURE() << value_of(a[size_t(i)]) << " + " << value_of(b[size_t(i)]) << " = "
                    << value_of(direct[size_t(i)]) << ", want " << value_of(want[size_t(i)]);
    EXPECT_EQ(via_mpi[size_t(i)], direct[size_t(i)]) << "element " << i;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(bf16_sum_op(), bf16_sum_op()) << "one op for the process";
}

}  // namespace bf16_sum_test
}  // namespace mt
