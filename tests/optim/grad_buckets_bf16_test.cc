// GradBuckets with reduce_in_bf16 (--grad-reduce-in-bf16): all-reduce and
// reduce-scatter, overlapped or not, leave in the fp32 buffer the average of
// the bf16-rounded gradients — where the optimizer reads (everything, or
// this rank's pieces) — and hand half the bytes of the fp32 path to MPI.
// Values k + 0.01 with integer k in [16, 63]: bf16 rounds the 0.01 away
// (its ulp there is 1/8 or 1/4) and the sums over up to 4 ranks (< 256) are
// exact in bf16, so the expected result is exact: (Σ k) · (1/DP), which
// differs from the fp32 path's (Σ (k + 0.01)) · (1/DP).
// On one rank nothing is communicated or rounded. CTest also runs it under
// mpirun -n 2.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "optim/grad_buckets.h"
#include "optim_test_util.h"

namespace mt {
namespace grad_buckets_bf16_test {

float integer_part(int rank, size_t param, int64_t i, int iteration) {
  return float(16 + (rank * 7 + int64_t(param) * 3 + i * 5 + iteration) % 48);
}

void fill(std::vector<float>& g, const ParamRegistry& reg, int rank, int iteration) {
  std::fill(g.begin(), g.end(), 0.f);
  for (size_t p = 0; p < reg.params().size(); ++p)
    for (int64_t i = 0; i < reg.params()[p].numel(); ++i)
      g[size_t(reg.params()[p].offset + i)] = integer_part(rank, p, i, iteration) + 0.01f;
}

class GradBucketsBf16 : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GradBucketsBf16, AverageOfTheRoundedGradientsAtHalfTheBytes) {
  const auto [overlap, distributed] = GetParam();
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  ASSERT_LE(dp.size(), 4) << "the sums must stay below 256 to be exact in bf16";
  std::vector<float> g(size_t(reg.total_floats())), g32(g.size());
  GradBuckets gb(reg, g.data(), dp, 700, overlap, distributed, /*reduce_in_bf16=*/true);
  GradBuckets fp32(reg, g32.data(), dp, 700, overlap, distributed);
  ASSERT_TRUE(gb.reduce_in_bf16());
  ASSERT_GT(gb.buckets().size(), 3u);
  std::vector<FlatRange> mine = {{0, reg.total_floats()}};
  if (distributed) mine = owned_ranges(gb.buckets(), dp.rank());
  const float inv = 1.f / float(dp.size());
  for (int it = 0; it < 2; ++it) {
    fill(g, reg, dp.rank(), it);
    fill(g32, reg, dp.rank(), it);
    const std::vector<float> before = g;
    for (size_t p = reg.params().size(); p-- > 0;) {
      gb.mark_ready(p);
      fp32.mark_ready(p);
    }
    gb.finish();
    fp32.finish();
    int bad = 0;
    for (size_t p = 0; p < reg.params().size(); ++p)
      for (int64_t i = 0; i < reg.params()[p].numel(); ++i) {
        const int64_t k = reg.params()[p].offset + i;
        bool owned = false;
        for (const FlatRange& r : mine) owned |= k >= r.begin && k < r.end;
        if (!owned) continue;
        float sum = 0;
        for (int r = 0; r < dp.size(); ++r) sum += integer_part(r, p, i, it);
        const float want = dp.size() == 1 ? before[size_t(k)] : sum * inv;
        if (g[size_t(k)] != want && bad++ < 5)
          ADD_FAILURE() << reg.params()[p].name << "[" << i << "] = " << g[size_t(k)] << ", want "
                        << want << " (fp32 path: " << g32[size_t(k)] << ")";
        if (dp.size() > 1) {
          EXPECT_NE(g32[size_t(k)], want) << "the test values do not round";
        }
      }
    EXPECT_EQ(bad, 0) << "iteration " << it;
  }
  // Bytes handed to MPI: every bucket, 2 bytes per element against 4.
  const int64_t per_iter = dp.size() > 1 ? reg.total_floats() : 0;
  EXPECT_EQ(gb.reduced_bytes(), 2 * 2 * per_iter);
  EXPECT_EQ(fp32.reduced_bytes(), 2 * 4 * per_iter);
  EXPECT_EQ(fp32.convert_seconds(), 0.0);
  if (dp.size() > 1) {
    EXPECT_GT(gb.convert_seconds(), 0.0);
  }
  gb.reset_timers();
  EXPECT_EQ(gb.reduced_bytes(), 0);
  EXPECT_EQ(gb.convert_seconds(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, GradBucketsBf16, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& i) {
      return std::string(std::get<0>(i.param) ? "Overlap" : "Blocking") +
             (std::get<1>(i.param) ? "ReduceScatter" : "AllReduce");
    });

}  // namespace grad_buckets_bf16_test
}  // namespace mt
