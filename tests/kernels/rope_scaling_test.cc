// Llama 3.1 RoPE scaling (kernels/rope_scaling.h) against torch's float32
// numbers (tests/reference/rope_scaling_reference.py, Hugging Face's
// _compute_llama3_parameters) and against the formula evaluated by hand in
// double at columns of each of the three regimes.
#include "kernels/rope_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/rope.h"

namespace mt {
namespace rope_scaling_test {

// Written by tests/reference/rope_scaling_reference.py (torch 1.13).
// head_dim 16, theta 10000, factor 8, low 1, high 4, original 64: column 0
// high frequency, 1 and 2 between, 3..7 low.
const std::vector<float> kSmall = {1.f,           0.244384587f,    0.0130422562f,
                                   0.00395284733f, 0.00124999997f, 0.000395284733f,
                                   0.000125000006f, 3.95284733e-05f};
// Llama 3.2 1B/3B: head_dim 64, theta 500000, factor 32, low 1, high 4, original 8192.
const std::vector<float> kLlama32 = {
    1.f,           0.663601279f,   0.440366626f,   0.292227834f,   0.193922758f,
    0.128687382f,  0.0853971019f,  0.0566696189f,  0.0376060307f,  0.0249554086f,
    0.0165604409f, 0.0109895291f,  0.00729266508f, 0.00483942125f, 0.00321144611f,
    0.00129054801f, 0.000429556705f, 9.70828623e-05f, 1.94616387e-05f, 1.29147675e-05f,
    8.57025589e-06f, 5.68723226e-06f, 3.77405445e-06f, 2.50446715e-06f, 1.66196742e-06f,
    1.10288363e-06f, 7.31874934e-07f, 4.85673127e-07f, 3.22293289e-07f, 2.1387423e-07f,
    1.41927202e-07f, 9.41830649e-08f};

RopeScaling llama3(float factor, int64_t original) {
  RopeScaling s;
  s.enabled = true;
  s.factor = factor;
  s.original_max_position_embeddings = original;
  return s;
}

// inv_freq as make_rope_table computes it (float32), scaled.
std::vector<float> scaled_inv_freq(int64_t dim, float base, const RopeScaling& s) {
  std::vector<float> f(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    f[size_t(i)] = 1.0f / std::pow(base, float(2 * i) / float(dim));
  rope_scale_inv_freq(f.data(), dim / 2, s);
  return f;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i])) << what << " column " << i;
}

TEST(RopeScaling, MatchesTorchNumbers) {
  expect_close(scaled_inv_freq(16, 10000.f, llama3(8.f, 64)), kSmall, "small");
  expect_close(scaled_inv_freq(64, 500000.f, llama3(32.f, 8192)), kLlama32, "llama 3.2");
}

TEST(RopeScaling, MatchesTheFormulaByHandInEachRegime) {
  // head_dim 16, theta 10000, factor 8, original 64: wavelengths 2 pi / f are
  // 6.3 (< 64 / 4: kept), 19.9 and 62.8 (between: interpolated), 199.. (> 64: / 8).
  const std::vector<float> got = scaled_inv_freq(16, 10000.f, llama3(8.f, 64));
  for (int i = 0; i < 8; ++i) {
    const double f = std::pow(10000.0, -i / 8.0), w = 2 * M_PI / f;
    double want = f / 8;
    if (w < 16) want = f;
    if (w >= 16 && w <= 64) {
      const double t = (64 / w - 1) / (4 - 1);
      want = (1 - t) * f / 8 + t * f;
    }
    EXPECT_NEAR(got[size_t(i)], want, 1e-6 * want) << "column " << i;
  }
  EXPECT_NEAR(got[1], 0.316227766 * (0.25964 / 8 + 0.74036), 1e-5);  // t = 0.74036 by hand
}

TEST(RopeScaling, DisabledLeavesTheFrequencies) {
  RopeScaling off = llama3(8.f, 64);
  off.enabled = false;
  const std::vector<float> got = scaled_inv_freq(16, 10000.f, off);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(got[size_t(i)], 1.0f / std::pow(10000.f, float(2 * i) / 16.f));
}

TEST(RopeScaling, TableRotatesByTheScaledFrequencies) {
  const RopeScaling s = llama3(8.f, 64);
  const RopeTable plain = make_rope_table(40, 16, 1.f, 10000.f);
  const RopeTable t = make_rope_table(40, 16, 1.f, 10000.f, s);
  for (int64_t p : {1, 7, 39})
    for (int64_t i = 0; i < 8; ++i) {
      const double angle = double(float(p) * kSmall[size_t(i)]);
      EXPECT_NEAR(t.cos[size_t(p * 8 + i)], std::cos(angle), 2e-6) << p << " " << i;
      EXPECT_NEAR(t.sin[size_t(p * 8 + i)], std::sin(angle), 2e-6) << p << " " << i;
    }
  EXPECT_EQ(t.cos[39 * 8 + 0], plain.cos[39 * 8 + 0]);  // high frequency: unchanged
  EXPECT_GT(std::fabs(t.cos[39 * 8 + 2] - plain.cos[39 * 8 + 2]), 0.05);
}

TEST(RopeScaling, BadValuesThrowNamingTheFlag) {
  auto message = [](RopeScaling s) {
    try {
      check_rope_scaling(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  RopeScaling s = llama3(0.5f, 64);
  EXPECT_NE(message(s).find("--rope-scaling-factor 0.5"), std::string::npos);
  s = llama3(8.f, 0);
  EXPECT_NE(message(s).find("--rope-scaling-original-max-position-embeddings 0"),
            std::string::npos);
  s = llama3(8.f, 64);
  s.high_freq_factor = 1.f;
  EXPECT_NE(message(s).find("--rope-scaling-high-freq-factor 1"), std::string::npos);
  s.enabled = false;
  EXPECT_EQ(message(s), "");
}

// YaRN (Megatron's YarnRotaryEmbedding) as DeepSeek-V3 sets it (factor 40,
// original 4096, beta 32 and 1) on 16 features of base 10000: the correction
// range is columns [floor(2.62), ceil(5.63)] = [2, 6], ramped linearly
// between keeping the frequency (below) and dividing it by 40 (above). The
// numbers: the formula in double by hand (Python's math module).
RopeScaling yarn(float factor, float mscale, float mscale_all_dim) {
  RopeScaling s;
  s.yarn = true;
  s.yarn_factor = factor;
  s.mscale = mscale;
  s.mscale_all_dim = mscale_all_dim;
  return s;
}

TEST(RopeScaling, YarnMatchesTheFormulaByHand) {
  const std::vector<float> want = {1.f,      0.316227766f, 0.1f,       0.0239147248f,
                                   0.005125f, 0.000849862121f, 2.5e-05f, 7.90569415e-06f};
  expect_close(scaled_inv_freq(16, 10000.f, yarn(40.f, 1.f, 0.f)), want, "yarn");
  // The concentration factor on cos and sin: mscale(40, m) / mscale(40, m_all).
  EXPECT_NEAR(rope_cos_sin_factor(yarn(40.f, 1.f, 0.f)), 1.3688879f, 1e-6);
  EXPECT_NEAR(rope_cos_sin_factor(yarn(40.f, 0.8f, 0.5f)), 1.0934332f, 1e-6);
  EXPECT_EQ(rope_cos_sin_factor(yarn(40.f, 1.f, 1.f)), 1.f);  // DeepSeek-V3's: cancels
  EXPECT_EQ(rope_cos_sin_factor(yarn(1.f, 1.f, 0.f)), 1.f);   // factor 1: plain RoPE
  expect_close(scaled_inv_freq(16, 10000.f, yarn(1.f, 1.f, 0.f)),
               scaled_inv_freq(16, 10000.f, RopeScaling{}), "factor 1");
  const RopeTable t = make_rope_table(8, 16, 1.f, 10000.f, yarn(40.f, 0.8f, 0.5f));
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_NEAR(t.cos[size_t(5 * 8 + i)], std::cos(5.0 * want[size_t(i)]) * 1.0934332, 2e-6);
}

TEST(RopeScaling, BadYarnValuesThrowNamingTheFlag) {
  auto message = [](RopeScaling s) {
    try {
      check_rope_scaling(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  RopeScaling s = yarn(0.f, 1.f, 0.f);
  EXPECT_NE(message(s).find("--rotary-scaling-factor"), std::string::npos);
  s = yarn(4.f, 1.f, 0.f);
  s.yarn_original_max_position_embeddings = 0;
  EXPECT_NE(message(s).find("--yarn-original-max-position-embeddings"), std::string::npos);
  s = yarn(4.f, 1.f, 0.f);
  s.enabled = true;
  EXPECT_NE(message(s).find("--use-rope-scaling"), std::string::npos);
}

}  // namespace rope_scaling_test
}  // namespace mt
