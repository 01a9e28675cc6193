// The CPU paths of the hand-vectorised kernels (kernels/cpu_isa.h): every path
// this machine has runs (scalar and AVX2 always, AVX-512 where present) and
// gives the scalar path's numbers: bit for bit where the math is integer
// (Philox, dropout masks) or a store (zeroing).
#include "kernels/cpu_isa.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/fill.h"
#include "kernels/kernel_test_util.h"
#include "kernels/philox_lanes.h"

namespace mt {
namespace cpu_isa_test {

TEST(CpuIsa, ScalarAndAvx2AlwaysRun) {
  const std::vector<Isa> isas = supported_isas();
  ASSERT_GE(isas.size(), 1u);
  EXPECT_EQ(isas[0], Isa::kScalar);
#if defined(__x86_64__)
  // Every CPU the project runs on (Xeon, EPYC with and without AVX-512) has
  // AVX2 + FMA: a machine without it would skip that path silently.
  ASSERT_GE(isas.size(), 2u) << "this CPU lacks AVX2 + FMA (or the OS its state)";
  EXPECT_EQ(isas[1], Isa::kAvx2);
#endif
  EXPECT_EQ(isas.back(), cpu_isa());
  std::printf("kernel paths run here:");
  for (Isa isa : isas) std::printf(" %s", isa_name(isa));
  std::printf("%s\n", cpu_isa() < Isa::kAvx512 ? " (no AVX-512 on this CPU)" : "");
}

TEST(CpuIsa, ForcingIsLoweredToTheCpuAndRestores) {
  const Isa before = active_isa();
  const Isa previous = set_isa_for_testing(Isa::kAvx512);
  EXPECT_EQ(previous, before);
  EXPECT_EQ(active_isa(), cpu_isa());  // AVX-512 only where the CPU has it
  set_isa_for_testing(Isa::kScalar);
  EXPECT_EQ(active_isa(), Isa::kScalar);
  set_isa_for_testing(before);
  EXPECT_EQ(active_isa(), before);
  EXPECT_STREQ(isa_name(Isa::kAvx2), "avx2");
}

TEST(PhiloxLanes, EveryPathDrawsRngStreamBlocksBitForBit) {
  RngStream rng = RngStream::make(77, "philox_lanes");
  rng.step = 0x1234'5678'9ABC'DEF0ull;  // both counter words of the step in use
  // Runs of every length around the register widths, from counters whose low
  // word wraps inside the run (the carry into the high word).
  const std::vector<uint64_t> firsts = {0, 5, 0xFFFF'FFF9ull, 0x3'FFFF'FFF0ull,
                                        0xFFFF'FFFF'FFFF'FFF8ull};
  for (uint64_t first : firsts) {
    for (int64_t count : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40}) {
      std::vector<uint32_t> want(size_t(4 * count));
      for (int64_t i = 0; i < count; ++i)
        for (int w = 0; w < 4; ++w) want[size_t(4 * i + w)] = rng.block(first + uint64_t(i)).v[w];
      for (Isa isa : supported_isas()) {
        std::vector<uint32_t> got(size_t(4 * count) + 4, 0xDEADBEEFu);  // one guard block
        philox_blocks(isa, got.data(), first, count, rng);
        for (int w = 0; w < 4; ++w)
          ASSERT_EQ(got[size_t(4 * count + w)], 0xDEADBEEFu) << "wrote past count " << count;
        got.resize(size_t(4 * count));
        ASSERT_EQ(got, want) << isa_name(isa) << " first=" << first << " count=" << count;
      }
    }
  }
}

TEST(PhiloxLanes, DropoutMultipliersAreTheSameOnEveryPath) {
  const RngStream rng = RngStream::make(3, "dropout_multipliers", 11);
  const float p = 0.37f, scale = 1.f / (1.f - p);
  for (uint64_t base : {uint64_t(0), uint64_t(3), uint64_t(0xFFFF'FFFEull) * 4 + 1}) {
    const int64_t n = 301;  // runs of 128 and a tail, from every block offset
    std::vector<float> want(n);
    for (int64_t j = 0; j < n; ++j)
      want[size_t(j)] = dropout_keep(rng, p, base + uint64_t(j)) ? scale : 0.f;
    test::for_each_isa([&](Isa) {
      std::vector<float> got(n, -1.f);
      for (int64_t j0 = 0, len = 0; j0 < n; j0 += len) {
        len = dropout_run(base + uint64_t(j0), n - j0);
        dropout_multipliers(got.data() + j0, len, base + uint64_t(j0), rng, p, scale);
      }
      EXPECT_EQ(got, want) << "base=" << base;
      // One call over the whole row splits it into the same runs.
      std::vector<float> whole(n, -1.f);
      dropout_multipliers(whole.data(), n, base, rng, p, scale);
      EXPECT_EQ(whole, want) << "base=" << base;
    });
  }
}

TEST(Fill, ZeroStreamingOnEveryPath) {
  test::for_each_isa([](Isa) {
    // Unaligned starts and lengths that leave a head and a tail on each thread.
    for (int64_t offset : {0, 1, 3, 5})
      for (int64_t n : {0, 1, 7, 17, 100, 1000, 4099}) {
        std::vector<float> buf(size_t(n + 24), 1.f);
        zero_streaming(buf.data() + offset, n);
        for (int64_t i = 0; i < int64_t(buf.size()); ++i)
          ASSERT_EQ(buf[size_t(i)], i >= offset && i < offset + n ? 0.f : 1.f)
              << "offset=" << offset << " n=" << n << " i=" << i;
      }
  });
}

}  // namespace cpu_isa_test
}  // namespace mt
