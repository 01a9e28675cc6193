// Megatron's _compare_floats and QuickStats.print_stats (train/rerun_check.h).
#include "train/rerun_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mt {
namespace rerun_check_test {

TEST(RerunCheck, CompareResultsIsMegatronsCompareFloats) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(compare_results(2.5, 2.5), 0.0);
  EXPECT_EQ(compare_results(nan, nan), 0.0);
  EXPECT_EQ(compare_results(inf, inf), 0.0);
  EXPECT_TRUE(std::isinf(compare_results(nan, 1.0)));
  EXPECT_TRUE(std::isinf(compare_results(1.0, inf)));
  EXPECT_TRUE(std::isinf(compare_results(nan, inf)));
  EXPECT_DOUBLE_EQ(compare_results(1.0, 3.0), 1.0);  // |1 - 3| / ((1 + 3) / 2)
}

TEST(RerunCheck, StatsPrintAsQuickStats) {
  DeterminismStats s;
  s.record(0);
  s.record(0);
  EXPECT_EQ(s.print(), "2 samples, all identical");
  for (int i = 0; i < 1000; ++i) s.record(0);
  EXPECT_EQ(s.print(), "1,002 samples, all identical");
  DeterminismStats d;
  d.record(0);
  d.record(0.5);
  d.record(0.25);
  d.record(1.0);
  // t = 4, z = 1: avg 1.75 / 4; p50 = sorted[2 - 1], p90 = sorted[3 - 1]...
  EXPECT_EQ(d.print(),
            "4/1 total/identical samples, rel. variability: avg= 4.375E-01, p50= 5.000E-01, "
            "p90= 1.000E+00, p99= 1.000E+00, p99.9= 1.000E+00, max: 1.000E+00");
}

}  // namespace rerun_check_test
}  // namespace mt
