#include "kernels/dropout.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace dropout_test {

// Copies x (s, b, h) rows [t0, t0+sl), samples [b0, b0+bl), columns [h0, h0+hl).
std::vector<float> slice3(const std::vector<float>& x, int64_t b, int64_t h, int64_t t0,
                          int64_t sl, int64_t b0, int64_t bl, int64_t h0, int64_t hl) {
  std::vector<float> y;
  for (int64_t t = t0; t < t0 + sl; ++t)
    for (int64_t bi = b0; bi < b0 + bl; ++bi)
      for (int64_t j = h0; j < h0 + hl; ++j) y.push_back(x[(t * b + bi) * h + j]);
  return y;
}

struct Whole {
  static constexpr int64_t s = 16, b = 3, h = 40, sample0 = 5;
  DropoutSpec spec(float p) const {
    DropoutSpec d;
    d.rng = RngStream::make(1234, "decoder.layers.1.hidden_dropout", /*step=*/7);
    d.p = p;
    d.s_global = s;
    d.h_global = h;
    d.sample0 = sample0;
    return d;
  }
};

TEST(Dropout, ShardsDrawTheMaskOfTheWholeTensor) {
  test::for_each_isa([](Isa) {
    const Whole w;
    const DropoutSpec full = w.spec(0.4f);
    auto x = test::randn(w.s * w.b * w.h, "do.x");
    std::vector<float> out(x.size());
    dropout_forward(out.data(), x.data(), w.s, w.b, w.h, full);

    auto check = [&](const char* what, int64_t t0, int64_t sl, int64_t b0, int64_t bl, int64_t h0,
                     int64_t hl) {
      DropoutSpec d = full;
      d.t0 = t0;
      d.h0 = h0;
      d.sample0 = full.sample0 + b0;
      auto xs = slice3(x, w.b, w.h, t0, sl, b0, bl, h0, hl);
      std::vector<float> ys(xs.size());
      dropout_forward(ys.data(), xs.data(), sl, bl, hl, d);
      EXPECT_EQ(ys, slice3(out, w.b, w.h, t0, sl, b0, bl, h0, hl)) << what;
      // Backward of the shard applies the same mask as the forward.
      auto g = xs;
      dropout_backward(g.data(), g.data(), sl, bl, hl, d);
      EXPECT_EQ(g, ys) << what << " (backward)";
    };
    check("sequence slab", 4, 6, 0, w.b, 0, w.h);
    check("column shard", 0, w.s, 0, w.b, 10, 20);
    check("micro-batch of one sample", 0, w.s, 1, 1, 0, w.h);
    check("slab x column x sample", 8, 8, 2, 1, 13, 17);  // odd offsets cross Philox blocks
  });
}

// On every CPU path (the masks are integer math: bit for bit).
TEST(Dropout, MaskIsDropoutKeepOfTheGlobalIndex) {
  test::for_each_isa([](Isa) {
    const Whole w;
    const float p = 0.3f;
    DropoutSpec d = w.spec(p);
    d.t0 = 3;
    d.h0 = 5;
    const int64_t sl = 7, hl = 29;
    std::vector<float> ones(sl * w.b * hl, 1.f), out(ones.size());
    dropout_forward(out.data(), ones.data(), sl, w.b, hl, d);
    const float scale = float(1.0 / (1.0 - p));
    for (int64_t t = 0; t < sl; ++t)
      for (int64_t bi = 0; bi < w.b; ++bi)
        for (int64_t j = 0; j < hl; ++j) {
          const uint64_t g = uint64_t(((w.sample0 + bi) * w.s + d.t0 + t) * w.h + d.h0 + j);
          ASSERT_EQ(out[(t * w.b + bi) * hl + j], dropout_keep(d.rng, p, g) ? scale : 0.f)
              << "t=" << t << " bi=" << bi << " j=" << j;
        }
  });
}

TEST(Dropout, KeepFractionScaleAndIteration) {
  const int64_t s = 64, b = 4, h = 1000;
  const float p = 0.1f;
  DropoutSpec d;
  d.rng = RngStream::make(9, "attention_dropout", 1);
  d.p = p;
  d.s_global = s;
  d.h_global = h;
  auto x = test::randn(s * b * h, "dof.x", 1.f, 3.f);
  std::vector<float> out(x.size()), out2(x.size());
  dropout_forward(out.data(), x.data(), s, b, h, d);
  int64_t kept = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    if (out[k] != 0.f) {
      ++kept;
      ASSERT_EQ(out[k], x[k] * float(1.0 / (1.0 - p)));
    }
  }
  EXPECT_NEAR(double(kept) / double(x.size()), 1.0 - p, 0.005);
  // Another iteration draws another mask; the same iteration the same one.
  d.rng.step = 2;
  dropout_forward(out2.data(), x.data(), s, b, h, d);
  int64_t same_kept = 0;
  for (size_t k = 0; k < x.size(); ++k) same_kept += (out[k] != 0.f) == (out2[k] != 0.f);
  EXPECT_LT(same_kept, int64_t(0.9 * double(x.size())));  // independent: ~0.82 agree
  d.rng.step = 1;
  dropout_forward(out2.data(), x.data(), s, b, h, d);
  EXPECT_EQ(out, out2);
}

TEST(Dropout, AddForwardAndBackwardUseOneMask) {
  const Whole w;
  const DropoutSpec d = w.spec(0.5f);
  const int64_t n = w.s * w.b * w.h;
  auto x = test::randn(n, "doa.x"), res = test::randn(n, "doa.res");
  std::vector<float> dropped(n), sum(n);
  dropout_forward(dropped.data(), x.data(), w.s, w.b, w.h, d);
  dropout_add_forward(sum.data(), x.data(), res.data(), w.s, w.b, w.h, d);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(sum[k], res[k] + dropped[k]);
  // In place over the residual stream.
  auto stream = res;
  dropout_add_forward(stream.data(), x.data(), stream.data(), w.s, w.b, w.h, d);
  EXPECT_EQ(stream, sum);
  // Backward: dx = mask * dout / (1 - p), zero exactly where forward dropped.
  auto dout = test::randn(n, "doa.dout");
  std::vector<float> dx(n);
  dropout_backward(dx.data(), dout.data(), w.s, w.b, w.h, d);
  for (int64_t k = 0; k < n; ++k) {
    const bool kept = dropped[k] != 0.f;
    ASSERT_EQ(dx[k], kept ? dout[k] * 2.f : 0.f) << "element " << k;
  }
}

TEST(Dropout, ZeroProbabilityIsExactIdentity) {
  DropoutSpec d;  // p = 0 with an empty layout: must not be consulted
  const int64_t s = 5, b = 2, h = 33, n = s * b * h;
  auto x = test::randn(n, "do0.x"), res = test::randn(n, "do0.res");
  std::vector<float> out(n, -1.f);
  dropout_forward(out.data(), x.data(), s, b, h, d);
  EXPECT_EQ(out, x);
  dropout_add_forward(out.data(), x.data(), res.data(), s, b, h, d);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(out[k], res[k] + x[k]);
  std::vector<float> dx(n);
  dropout_backward(dx.data(), x.data(), s, b, h, d);
  EXPECT_EQ(dx, x);
  auto alias = x;
  dropout_forward(alias.data(), alias.data(), s, b, h, d);
  EXPECT_EQ(alias, x);
}

TEST(Dropout, RejectsBadProbabilityAndShard) {
  const Whole w;
  std::vector<float> x(w.s * w.b * w.h);
  DropoutSpec d = w.spec(1.f);
  EXPECT_THROW(dropout_forward(x.data(), x.data(), w.s, w.b, w.h, d), Error);
  d = w.spec(0.1f);
  d.t0 = 1;  // slab [1, 17) does not fit s_global = 16
  EXPECT_THROW(dropout_forward(x.data(), x.data(), w.s, w.b, w.h, d), Error);
  d = w.spec(0.1f);
  d.h0 = 1;
  EXPECT_THROW(dropout_backward(x.data(), x.data(), w.s, w.b, w.h, d), Error);
}

}  // namespace dropout_test
}  // namespace mt
