#include "kernels/rope.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace rope_test {

using test::randn;

// Direct evaluation in double, written as HF Llama's apply_rotary_pos_emb:
// emb = cat(freqs, freqs), y = x * cos(emb) + rotate_half(x) * sin(emb),
// rotate_half(x) = cat(-x2, x1), on the first rot_dim features of each head
// vector of x (b, a, s, d) at position pos0 + t. Angles as float32 tensors.
std::vector<double> rope_ref(const std::vector<double>& x, int64_t b, int64_t a, int64_t s,
                             int64_t d, int64_t rot_dim, float base, int64_t pos0) {
  const int64_t half = rot_dim / 2;
  std::vector<double> y = x;
  for (int64_t h = 0; h < b * a; ++h)
    for (int64_t t = 0; t < s; ++t) {
      const double* xv = x.data() + (h * s + t) * d;
      double* yv = y.data() + (h * s + t) * d;
      for (int64_t j = 0; j < rot_dim; ++j) {
        const int64_t i = j % half;
        const float inv = 1.0f / std::pow(base, float(2 * i) / float(rot_dim));
        const double angle = double(float(pos0 + t) * inv);
        const double rot = j < half ? -xv[j + half] : xv[j - half];
        yv[j] = xv[j] * std::cos(angle) + rot * std::sin(angle);
      }
    }
  return y;
}

TEST(Rope, TableMatchesKnownValues) {
  // base 10000, head_dim 8: inv_freq[1] = 10000^(-2/8) = 0.1, so position 3 has angle 0.3.
  const RopeTable t = make_rope_table(16, 8, 1.f, 10000.f);
  ASSERT_EQ(t.rot_dim, 8);
  ASSERT_EQ(t.max_pos, 16);
  ASSERT_EQ(t.cos.size(), size_t(16 * 4));
  ASSERT_EQ(t.sin.size(), size_t(16 * 4));
  EXPECT_NEAR(t.cos[3 * 4 + 1], 0.955336489125606, 1e-6);   // cos(0.3)
  EXPECT_NEAR(t.sin[3 * 4 + 1], 0.29552020666133955, 1e-6);  // sin(0.3)
  // Column 0 has inv_freq 1; position 0 has angle 0.
  EXPECT_NEAR(t.cos[5 * 4 + 0], std::cos(5.0), 1e-6);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(t.cos[size_t(i)], 1.f);
    EXPECT_EQ(t.sin[size_t(i)], 0.f);
  }
}

TEST(Rope, TableUsesFloat32Angles) {
  // head_dim 128, position 4095, column 1: the float32 angle float(4095) *
  // float(10000^(-2/128)) is what HF/Megatron models were trained with; its
  // cosine differs from the exact angle's by 8e-5.
  const RopeTable t = make_rope_table(4096, 128, 1.f, 10000.f);
  const int64_t half = 64;
  const float cos_f = t.cos[size_t(4095 * half + 1)];
  EXPECT_NEAR(cos_f, -0.742445707, 1e-6);
  EXPECT_GT(std::fabs(cos_f - std::cos(4095 * std::pow(10000.0, -2.0 / 128))), 5e-5);
}

TEST(Rope, RotaryDimFollowsPythonInt) {
  EXPECT_EQ(make_rope_table(4, 64, 0.5f, 10000.f).rot_dim, 32);
  EXPECT_EQ(make_rope_table(4, 128, 0.25f, 10000.f).rot_dim, 32);
  // int(20 * 0.7) = 14 in Python although 20 * 0.7f = 13.9999995.
  EXPECT_EQ(make_rope_table(4, 20, 0.7f, 10000.f).rot_dim, 14);
}

TEST(Rope, ForwardMatchesDirectEvaluation) {
  const int64_t b = 2, a = 3, s = 7, d = 16;
  for (float pct : {1.f, 0.5f}) {
    for (int64_t pos0 : {0, 5}) {
      const RopeTable t = make_rope_table(16, d, pct, 10000.f);
      auto x = randn(b * a * s * d, "rope.x");
      auto ref = rope_ref(test::to_double(x), b, a, s, d, t.rot_dim, 10000.f, pos0);
      auto y = x;
      rope_forward(y.data(), b, a, s, d, t, pos0);
      for (size_t k = 0; k < y.size(); ++k)
        ASSERT_NEAR(y[k], ref[k], 2e-6) << "pct " << pct << " pos0 " << pos0 << " element " << k;
      if (pct < 1.f) {  // features [rot_dim, d) pass through bit for bit
        for (int64_t r = 0; r < b * a * s; ++r)
          for (int64_t j = t.rot_dim; j < d; ++j) ASSERT_EQ(y[r * d + j], x[r * d + j]);
      }
    }
  }
}

TEST(Rope, DecodeStepMatchesRowOfFullSequence) {
  // rope_forward with s = 1 at pos0 = p (one decode step) and with s = 3 at
  // pos0 = p (a later chunk) equal rows p.. of the full-sequence result.
  const int64_t b = 2, a = 2, s = 12, d = 8;
  const RopeTable t = make_rope_table(s, d, 0.5f, 10000.f);
  auto x = randn(b * a * s * d, "rope.dec");
  auto full = x;
  rope_forward(full.data(), b, a, s, d, t, 0);
  for (int64_t len : {1, 3}) {
    for (int64_t p = 0; p + len <= s; ++p) {
      std::vector<float> step(b * a * len * d);
      for (int64_t h = 0; h < b * a; ++h)
        for (int64_t k = 0; k < len * d; ++k) step[h * len * d + k] = x[(h * s + p) * d + k];
      rope_forward(step.data(), b, a, len, d, t, p);
      for (int64_t h = 0; h < b * a; ++h)
        for (int64_t k = 0; k < len * d; ++k)
          ASSERT_EQ(step[h * len * d + k], full[(h * s + p) * d + k])
              << "len " << len << " p " << p << " head " << h << " k " << k;
    }
  }
}

TEST(Rope, BackwardAfterForwardIsIdentity) {
  const int64_t b = 2, a = 3, s = 9, d = 12;
  const RopeTable t = make_rope_table(32, d, 0.5f, 500000.f);
  auto x = randn(b * a * s * d, "rope.inv", 3.f);
  auto y = x;
  rope_forward(y.data(), b, a, s, d, t, 4);
  rope_backward(y.data(), b, a, s, d, t, 4);
  for (size_t k = 0; k < y.size(); ++k) ASSERT_NEAR(y[k], x[k], 2e-6 * 3) << "element " << k;
}

TEST(Rope, BackwardFiniteDifference) {
  const int64_t b = 1, a = 2, s = 5, d = 12;
  const int64_t pos0 = 3;
  const RopeTable t = make_rope_table(8, d, 0.5f, 10000.f);
  auto x = randn(b * a * s * d, "ropeg.x"), dout = randn(b * a * s * d, "ropeg.dout");
  auto dx = dout;  // L = sum(rope(x) * dout); dL/dx = rope_backward(dout)
  rope_backward(dx.data(), b, a, s, d, t, pos0);
  auto num = test::numeric_grad(
      [&](const std::vector<double>& v) {
        const auto y = rope_ref(v, b, a, s, d, t.rot_dim, 10000.f, pos0);
        double l = 0;
        for (size_t k = 0; k < y.size(); ++k) l += y[k] * dout[k];
        return l;
      },
      test::to_double(x));
  test::expect_grad_close(dx, num, 1e-5, 1e-4, "rope dx");
}

// Per-token positions (--reset-position-ids): row t of sample bi rotates as
// rope_forward of that row alone at its own position; backward is the
// transpose (finite differences of the per-row reference).
TEST(Rope, PerTokenPositionsRotateEachRowAtItsOwnPosition) {
  const int64_t b = 2, a = 2, s = 7, d = 8;
  const RopeTable t = make_rope_table(16, d, 1.f, 10000.f);
  // (s, b) sequence-first: sample 0 restarts after row 3, sample 1 is 9.. on.
  const std::vector<int32_t> pos = {0, 9, 1, 10, 2, 11, 3, 12, 0, 13, 1, 14, 2, 15};
  auto x = randn(b * a * s * d, "rope.at");
  auto y = x;
  rope_forward_at(y.data(), b, a, s, d, t, pos.data());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t r = 0; r < s; ++r) {
        const int64_t row = ((bi * a + j) * s + r) * d;
        std::vector<float> one(x.begin() + row, x.begin() + row + d);
        rope_forward(one.data(), 1, 1, 1, d, t, pos[size_t(r * b + bi)]);
        for (int64_t k = 0; k < d; ++k) ASSERT_EQ(y[size_t(row + k)], one[size_t(k)]) << row + k;
      }
  auto dout = randn(b * a * s * d, "rope.at.dout");
  auto dx = dout;
  rope_backward_at(dx.data(), b, a, s, d, t, pos.data());
  auto num = test::numeric_grad(
      [&](const std::vector<double>& v) {
        double l = 0;
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t j = 0; j < a; ++j)
            for (int64_t r = 0; r < s; ++r) {
              const int64_t row = ((bi * a + j) * s + r) * d;
              const std::vector<double> one(v.begin() + row, v.begin() + row + d);
              const auto yr = rope_ref(one, 1, 1, 1, d, t.rot_dim, 10000.f, pos[size_t(r * b + bi)]);
              for (int64_t k = 0; k < d; ++k) l += yr[size_t(k)] * dout[size_t(row + k)];
            }
        return l;
      },
      test::to_double(x));
  test::expect_grad_close(dx, num, 1e-5, 1e-4, "rope_at dx");
  const std::vector<int32_t> bad = {0, 9, 1, 10, 2, 11, 3, 12, 0, 13, 1, 14, 2, 16};
  EXPECT_THROW(rope_forward_at(y.data(), b, a, s, d, t, bad.data()), Error);  // 16 >= max_pos
}

TEST(Rope, IsDeterministicAcrossThreadCounts) {
  const int64_t b = 2, a = 4, s = 33, d = 64;
  const RopeTable t = make_rope_table(64, d, 1.f, 10000.f);
  const auto x = randn(b * a * s * d, "roped.x");
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    auto y = x, g = x;
    rope_forward(y.data(), b, a, s, d, t, 7);
    rope_backward(g.data(), b, a, s, d, t, 7);
    omp_set_num_threads(saved);
    y.insert(y.end(), g.begin(), g.end());
    return y;
  };
  const auto one = run(1), two = run(2), three = run(3);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

TEST(Rope, BadInputThrows) {
  EXPECT_THROW(make_rope_table(16, 6, 0.5f, 10000.f), Error);  // rot_dim 3, odd
  EXPECT_THROW(make_rope_table(16, 8, 0.1f, 10000.f), Error);  // rot_dim 0
  EXPECT_THROW(make_rope_table(16, 8, 0.f, 10000.f), Error);
  EXPECT_THROW(make_rope_table(16, 8, 1.5f, 10000.f), Error);
  const RopeTable t = make_rope_table(16, 8, 1.f, 10000.f);
  std::vector<float> x(2 * 4 * 8);
  EXPECT_NO_THROW(rope_forward(x.data(), 1, 2, 4, 8, t, 12));
  EXPECT_THROW(rope_forward(x.data(), 1, 2, 4, 8, t, 13), Error);  // 13 + 4 > 16
  EXPECT_THROW(rope_backward(x.data(), 1, 2, 4, 8, t, 13), Error);
  EXPECT_THROW(rope_forward(x.data(), 1, 2, 4, 6, t, 0), Error);  // d 6 < rot_dim 8
  EXPECT_THROW(rope_forward(x.data(), 1, 2, 4, 8, RopeTable{}, 0), Error);
  try {
    make_rope_table(16, 6, 0.5f, 10000.f);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--rotary-percent"), std::string::npos) << e.what();
  }
  try {
    rope_forward(x.data(), 1, 2, 4, 8, t, 13);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-position-embeddings"), std::string::npos)
        << e.what();
  }
}

}  // namespace rope_test
}  // namespace mt
