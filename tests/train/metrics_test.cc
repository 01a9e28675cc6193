// The MFU a run reports: never above 1. An achieved rate above the start-up
// peak (a low measurement: 2048^3 read 0.11-0.14 TFLOP/s on a Cascade Lake
// where GPT-2 small then did 0.145, so MFU 111%) raises the peak to it, said
// once; every later MFU is against the raised peak.
#include "observe/metrics.h"

#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace mt {
namespace metrics_test {

TEST(MfuPeak, BelowThePeakIsAchievedOverPeak) {
  MfuPeak p{200e9, 200e9, "measured at start-up, best of 3 shapes", false};
  std::string note = "stale";
  EXPECT_DOUBLE_EQ(reported_mfu(150e9, p, &note), 0.75);
  EXPECT_TRUE(note.empty());
  EXPECT_FALSE(p.raised);
  EXPECT_DOUBLE_EQ(p.flops, 200e9);
}

TEST(MfuPeak, AboveThePeakRaisesItOnceAndNeverReportsMoreThanOne) {
  MfuPeak p{120e9, 120e9, "measured at start-up, best of 3 shapes", false};
  std::string note;
  EXPECT_DOUBLE_EQ(reported_mfu(145e9, p, &note), 1.0);
  EXPECT_TRUE(p.raised);
  EXPECT_DOUBLE_EQ(p.flops, 145e9);
  EXPECT_DOUBLE_EQ(p.measured, 120e9);
  EXPECT_NE(note.find("peak raised to the achieved 145.0 GFLOP/s per rank: the start-up "
                      "measurement (120.0 GFLOP/s, measured at start-up, best of 3 shapes) was low"),
            std::string::npos) << note;
  // Later intervals: against the raised peak; a higher rate raises it again,
  // silently (said once).
  EXPECT_NEAR(reported_mfu(116e9, p, &note), 0.8, 1e-12);
  EXPECT_TRUE(note.empty());
  EXPECT_DOUBLE_EQ(reported_mfu(160e9, p, &note), 1.0);
  EXPECT_TRUE(note.empty());
  EXPECT_DOUBLE_EQ(p.flops, 160e9);
  EXPECT_DOUBLE_EQ(reported_mfu(80e9, p), 0.5);
}

TEST(MfuPeak, NeverAboveOneOverAnySequence) {
  MfuPeak p{1e9, 1e9, "--peak-tflops", false};
  int notes = 0;
  for (int i = 0; i < 1000; ++i) {
    const double achieved = 1e9 * (0.5 + std::fmod(i * 0.618034, 3.0));
    std::string note;
    const double mfu = reported_mfu(achieved, p, &note);
    EXPECT_LE(mfu, 1.0) << achieved;
    EXPECT_GT(mfu, 0.0) << achieved;
    notes += !note.empty();
  }
  EXPECT_EQ(notes, 1);
  // Nothing achieved, or a broken timer: 0, the peak untouched.
  const double before = p.flops;
  EXPECT_EQ(reported_mfu(0, p), 0.0);
  EXPECT_EQ(reported_mfu(std::numeric_limits<double>::quiet_NaN(), p), 0.0);
  EXPECT_EQ(reported_mfu(std::numeric_limits<double>::infinity(), p), 0.0);
  EXPECT_EQ(p.flops, before);
  // No peak at all: the achieved rate is the peak.
  MfuPeak none;
  EXPECT_DOUBLE_EQ(reported_mfu(5e9, none), 1.0);
}

// Megatron's num_floating_point_operations with --mtp-num-layers D: the D
// depths' layers count as D more decoder layers (of the last layer's kind),
// plus per depth 3 x 2 x tokens x (3h norms + 2h^2 eh_proj + h·v logits).
TEST(Flops, MtpDepthsCountAsMegatronsFormula) {
  ModelConfig c;
  c.num_layers = 3;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.seq_length = 32;
  c.vocab_size = 100;
  c.position_embedding_type = "rope";
  c.mtp_num_layers = 2;
  c.finalize(1);
  ModelConfig deeper = c;
  deeper.mtp_num_layers = 0;
  deeper.num_layers = 5;
  const double tokens = 8.0 * 32, h = 64, v = double(c.padded_vocab_size);
  EXPECT_NEAR(flops_per_iteration(c, 8),
              flops_per_iteration(deeper, 8) + 2 * 6 * tokens * (3 * h + 2 * h * h + h * v),
              1e-9 * flops_per_iteration(c, 8));
}

}  // namespace metrics_test
}  // namespace mt
