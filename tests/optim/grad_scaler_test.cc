// fp16 loss scaling: the scale sequences Megatron's DynamicGradScaler gives
// for fixed overflow patterns, checkpoint state, and the unscale kernel.
// Rank-independent (this binary also runs under mpirun).
#include "optim/grad_scaler.h"

#include "kernels/reduce.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace mt {
namespace grad_scaler_test {

// Applies `pattern` ('T' overflow, 'F' clean) and returns the scale after each.
std::vector<double> run(GradScaler& g, const std::string& pattern) {
  std::vector<double> out;
  for (char c : pattern) {
    g.update(c == 'T');
    out.push_back(g.scale());
  }
  return out;
}

TEST(GradScaler, HysteresisTwoBacksOffOnTheSecondOverflow) {
  GradScaler g = GradScaler::dynamic(65536.0, 1.0);  // growth 2, backoff .5, window 1000, hyst 2
  EXPECT_TRUE(g.is_dynamic());
  EXPECT_EQ(g.hysteresis_tracker(), 2);
  // 1st overflow: tracker 1, no back-off; 2nd: tracker 0, halve; every further
  // overflow halves again (tracker goes negative), a clean step between does
  // not restore the hysteresis budget.
  EXPECT_EQ(run(g, "TTTFT"), (std::vector<double>{65536, 32768, 16384, 16384, 8192}));
  EXPECT_EQ(g.hysteresis_tracker(), -2);
  EXPECT_EQ(g.growth_tracker(), 0);
  EXPECT_DOUBLE_EQ(g.inv_scale(), 1.0 / 8192);
}

TEST(GradScaler, GrowsAfterTheWindowAndResetsHysteresis) {
  GradScaler g = GradScaler::dynamic(1024.0, 1.0, 2.0, 0.5, /*growth_interval=*/3,
                                     /*hysteresis=*/2);
  // Three clean steps grow; an overflow resets the growth count; after the
  // next growth the hysteresis budget is back to 2 (one free overflow again).
  EXPECT_EQ(run(g, "FFF"), (std::vector<double>{1024, 1024, 2048}));
  EXPECT_EQ(g.growth_tracker(), 0);
  EXPECT_EQ(run(g, "TFFTFFF"), (std::vector<double>{2048, 2048, 2048, 1024, 1024, 1024, 2048}));
  EXPECT_EQ(g.hysteresis_tracker(), 2);
  EXPECT_EQ(run(g, "TT"), (std::vector<double>{2048, 1024}));
  EXPECT_EQ(g.hysteresis_tracker(), 0);
}

TEST(GradScaler, BackOffIsClampedAtMinScale) {
  GradScaler g = GradScaler::dynamic(4.0, 1.5, 2.0, 0.5, 1000, /*hysteresis=*/1);
  EXPECT_EQ(run(g, "TTTT"), (std::vector<double>{2.0, 1.5, 1.5, 1.5}));
  GradScaler one = GradScaler::dynamic(8.0, 1.0, 2.0, 0.5, 1000, 1);
  EXPECT_EQ(run(one, "TTTTT"), (std::vector<double>{4, 2, 1, 1, 1}));
}

TEST(GradScaler, CustomFactors) {
  GradScaler g = GradScaler::dynamic(100.0, 1.0, 4.0, 0.25, 2, 1);
  EXPECT_EQ(run(g, "FFTFF"), (std::vector<double>{100, 400, 100, 100, 400}));
}

TEST(GradScaler, ConstantNeverChanges) {
  GradScaler g = GradScaler::constant(128.0);
  EXPECT_FALSE(g.is_dynamic());
  EXPECT_EQ(run(g, "TTTTFFFF"), std::vector<double>(8, 128.0));
  g.load_state(nlohmann::json{{"scale", 2.0}, {"growth_tracker", 0}, {"hysteresis_tracker", 0}});
  EXPECT_EQ(g.scale(), 128.0);
  EXPECT_DOUBLE_EQ(g.inv_scale(), 1.0 / 128);
}

TEST(GradScaler, StateRoundTripResumesTheSameSequence) {
  GradScaler a = GradScaler::dynamic(4096.0, 1.0, 2.0, 0.5, 4, 3);
  run(a, "FFTFTF");  // growth 1, hysteresis 1, scale unchanged
  const std::string saved = a.state().dump();
  GradScaler b = GradScaler::dynamic(4096.0, 1.0, 2.0, 0.5, 4, 3);
  b.load_state(nlohmann::json::parse(saved));
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.growth_tracker(), 1);
  EXPECT_EQ(b.hysteresis_tracker(), 1);
  // Same future: the next overflow backs off (budget 1), growth after 4 clean.
  const std::string next = "TFFFFTT";
  const std::vector<double> want = {2048, 2048, 2048, 2048, 4096, 4096, 4096};
  EXPECT_EQ(run(b, next), want);
  EXPECT_EQ(run(a, next), want);
  EXPECT_EQ(b.state(), a.state());
  EXPECT_EQ(b.hysteresis_tracker(), 1);  // reset to 3 by the growth, then two overflows
}

TEST(GradScaler, RejectsBadConfigAndState) {
  EXPECT_THROW(GradScaler::dynamic(1.0, 2.0), Error);              // min > initial
  EXPECT_THROW(GradScaler::dynamic(8.0, 1.0, 1.0), Error);         // growth <= 1
  EXPECT_THROW(GradScaler::dynamic(8.0, 1.0, 2.0, 1.0), Error);    // backoff >= 1
  EXPECT_THROW(GradScaler::dynamic(8.0, 1.0, 2.0, 0.5, 0), Error);  // window 0
  EXPECT_THROW(GradScaler::dynamic(8.0, 1.0, 2.0, 0.5, 10, 0), Error);
  EXPECT_THROW(GradScaler::constant(0.0), Error);
  GradScaler g = GradScaler::dynamic(8.0, 1.0);
  EXPECT_THROW(g.load_state(nlohmann::json{{"scale", 8.0}}), Error);
  EXPECT_THROW(g.load_state(nlohmann::json{{"scale", -1.0}, {"growth_tracker", 0},
                                           {"hysteresis_tracker", 2}}),
               Error);
  EXPECT_EQ(g.scale(), 8.0);  // unchanged by the failed loads
}

std::vector<float> ramp(int64_t n) {
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) g[size_t(i)] = float((i % 97) - 48) * 0.5f + 1e-3f * float(i);
  return g;
}

TEST(UnscaleAndCheck, CleanBufferIsScaledExactly) {
  const int64_t n = 10007;
  std::vector<float> g = ramp(n), want = ramp(n);
  g[5] = FLT_MAX;  // large but finite
  want[5] = FLT_MAX;
  EXPECT_FALSE(unscale_and_check(g.data(), n, 0.25f));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[size_t(i)], want[size_t(i)] * 0.25f) << "at " << i;
  EXPECT_FALSE(unscale_and_check(nullptr, 0, 0.5f));
}

TEST(UnscaleAndCheck, FindsInfAndNanAnywhere) {
  const int64_t n = 4099;
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {kInf, -kInf, kNan}) {
    for (int64_t at : {int64_t(0), int64_t(1234), n - 1}) {
      std::vector<float> g = ramp(n);
      g[size_t(at)] = bad;
      EXPECT_TRUE(unscale_and_check(g.data(), n, 0.5f)) << "value " << bad << " at " << at;
      EXPECT_EQ(g[17], ramp(n)[17] * 0.5f);  // the rest is still unscaled
    }
  }
}

TEST(UnscaleAndCheck, OverflowDrivesTheScalerDown) {
  // The loop the optimizer runs: unscale, report overflow, update.
  GradScaler s = GradScaler::dynamic(1024.0, 1.0, 2.0, 0.5, 1000, 1);
  std::vector<float> g = {1.f, std::numeric_limits<float>::infinity(), 3.f};
  s.update(unscale_and_check(g.data(), 3, float(s.inv_scale())));
  EXPECT_EQ(s.scale(), 512.0);
  std::vector<float> clean = {1024.f, 2048.f};
  s.update(unscale_and_check(clean.data(), 2, float(s.inv_scale())));
  EXPECT_EQ(clean[0], 2.f);
  EXPECT_EQ(clean[1], 4.f);
  EXPECT_EQ(s.scale(), 512.0);
}

}  // namespace grad_scaler_test
}  // namespace mt
