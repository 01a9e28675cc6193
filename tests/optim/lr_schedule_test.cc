#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace mt {
namespace lr_schedule_test {

LrSchedule make(LrDecayStyle style) {
  LrSchedule s;
  s.max_lr = 1e-3;
  s.min_lr = 1e-4;
  s.warmup_iters = 10;
  s.decay_iters = 110;
  s.style = style;
  return s;
}

TEST(LrSchedule, LinearWarmupFromZero) {
  const LrSchedule s = make(LrDecayStyle::kCosine);
  EXPECT_EQ(s.lr_at(0), 0.0);  // Megatron: the first iteration trains with lr 0
  EXPECT_NEAR(s.lr_at(5), 5e-4, 1e-12);
  EXPECT_NEAR(s.lr_at(10), 1e-3, 1e-12);
}

TEST(LrSchedule, CosineLinearConstantAndMinLr) {
  const LrSchedule cos = make(LrDecayStyle::kCosine), lin = make(LrDecayStyle::kLinear);
  const LrSchedule con = make(LrDecayStyle::kConstant);
  EXPECT_NEAR(cos.lr_at(60), 1e-4 + 0.5 * 9e-4, 1e-12);  // half-way: cos(pi/2) = 0
  EXPECT_NEAR(cos.lr_at(35), 1e-4 + 9e-4 * 0.5 * (std::cos(M_PI * 0.25) + 1), 1e-12);
  EXPECT_NEAR(lin.lr_at(35), 1e-4 + 9e-4 * 0.75, 1e-12);
  EXPECT_NEAR(cos.lr_at(110), 1e-4, 1e-12);
  EXPECT_EQ(cos.lr_at(111), 1e-4);
  EXPECT_EQ(lin.lr_at(500), 1e-4);
  EXPECT_EQ(con.lr_at(500), 1e-3);
  EXPECT_NEAR(con.lr_at(5), 5e-4, 1e-12);
}

TEST(LrSchedule, WarmupStableDecay) {
  LrSchedule s = make(LrDecayStyle::kWsd);
  s.wsd_decay_iters = 20;
  s.wsd_style = WsdDecayStyle::kLinear;
  EXPECT_EQ(s.lr_at(50), 1e-3);  // stable phase
  EXPECT_EQ(s.lr_at(90), 1e-3);  // anneal starts at 110 - 20
  EXPECT_NEAR(s.lr_at(100), 1e-4 + 9e-4 * 0.5, 1e-12);
  s.wsd_style = WsdDecayStyle::kExponential;
  EXPECT_NEAR(s.lr_at(100), 1e-4 + 9e-4 * (2 * std::pow(0.5, 0.5) - 1), 1e-12);
  s.wsd_style = WsdDecayStyle::kMinusSqrt;
  EXPECT_NEAR(s.lr_at(110), 1e-4, 1e-12);
}

// Sample-based lengths that the global batch does not divide (Megatron counts
// samples): --lr-warmup-samples 12 at batch 8 is 1.5 iterations, so the
// second iteration (after 8 samples) trains with 8/12 of the peak.
TEST(LrSchedule, FractionalLengthsAreMegatronsSampleCounts) {
  LrSchedule s = make(LrDecayStyle::kLinear);
  s.warmup_iters = 12.0 / 8;
  s.decay_iters = 40.0 / 8;
  EXPECT_NEAR(s.lr_at(1), 1e-3 * 8 / 12, 1e-15);
  // Decay over samples 12..40: after 16 samples (2 iterations), 4/28 of the way.
  EXPECT_NEAR(s.lr_at(2), 1e-4 + 9e-4 * (1 - 4.0 / 28), 1e-15);
  EXPECT_EQ(s.lr_at(6), 1e-4);
}

TEST(LrSchedule, RejectsBadSettings) {
  LrSchedule s = make(LrDecayStyle::kCosine);
  s.warmup_iters = 200;
  EXPECT_THROW(s.validate(), Error);
  s = make(LrDecayStyle::kCosine);
  s.min_lr = 1.0;
  EXPECT_THROW(s.validate(), Error);
  EXPECT_THROW(parse_lr_decay_style("cosinus"), Error);
  EXPECT_EQ(parse_lr_decay_style("WSD"), LrDecayStyle::kWsd);
}

}  // namespace lr_schedule_test
}  // namespace mt
