#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mt {

// Known-answer test from the Random123 distribution (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswer) {
  Philox4 r = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
}

TEST(RngStream, NormalMomentsAndDeterminism) {
  RngStream a = RngStream::make(1234, "decoder.layers.0.mlp.linear_fc1.weight");
  RngStream b = RngStream::make(1234, "decoder.layers.0.mlp.linear_fc1.weight");
  RngStream c = RngStream::make(1235, "decoder.layers.0.mlp.linear_fc1.weight");
  const int n = 200000;
  double sum = 0, sum2 = 0;
  int same_c = 0;
  for (int i = 0; i < n; ++i) {
    float x = a.normal(i);
    EXPECT_EQ(x, b.normal(i));
    same_c += (x == c.normal(i));
    sum += x;
    sum2 += double(x) * x;
  }
  EXPECT_LT(same_c, 5);
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
}

TEST(RngStream, UniformRangeAndStepChangesStream) {
  RngStream a = RngStream::make(7, "dropout", 1), b = RngStream::make(7, "dropout", 2);
  int same = 0;
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    float u = a.uniform(i);
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    sum += u;
    same += (u == b.uniform(i));
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  EXPECT_LT(same, 10);
}

}  // namespace mt
