// Attention in blocks of queries and keys at global positions (what context
// parallelism's ring computes): blocks merged by their log-sum-exp equal the
// whole causal attention, forward and backward, with the dropout mask keyed by
// global positions; blocks that see no key give ctx 0 and lse -inf. With a
// sliding window the blocks use global positions for it too.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"

namespace mt {
namespace attention_blocks_test {

using test::randn;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Range {
  int64_t p0, n;  // global positions [p0, p0 + n)
};

// Rows r of x (bh, S, w) → (bh, r.n, w).
std::vector<float> take(const std::vector<float>& x, int64_t bh, int64_t S, int64_t w, Range r) {
  std::vector<float> out(size_t(bh * r.n * w));
  for (int64_t h = 0; h < bh; ++h)
    for (int64_t i = 0; i < r.n * w; ++i)
      out[size_t(h * r.n * w + i)] = x[size_t((h * S + r.p0) * w + i)];
  return out;
}

// x rows r += part (bh, r.n, w).
void add_rows(std::vector<float>& x, const std::vector<float>& part, int64_t bh, int64_t S,
              int64_t w, Range r) {
  for (int64_t h = 0; h < bh; ++h)
    for (int64_t i = 0; i < r.n * w; ++i)
      x[size_t((h * S + r.p0) * w + i)] += part[size_t(h * r.n * w + i)];
}

AttentionDims block_dims(int64_t b, int64_t a, int64_t d, int64_t S, Range q, Range k,
                         MathMode math, int64_t window) {
  AttentionDims dm{b, a, q.n, d, math};
  dm.window_left = window;
  dm.sk = k.n;
  dm.q_pos0 = q.p0;
  dm.k_pos0 = k.p0;
  dm.s_global = S;
  return dm;
}

AttentionDropout dropout(float p) {
  AttentionDropout drop;
  drop.rng = RngStream::make(11, "attention_dropout", /*step=*/2);
  drop.p = p;
  drop.sample0 = 1;
  drop.a_global = 4;
  drop.head0 = 1;
  return drop;
}

// Query and key ranges that cut across each other and the 128-row query block.
const std::vector<Range> kQueries = {{0, 75}, {75, 90}, {165, 135}};
const std::vector<Range> kKeys = {{0, 40}, {40, 130}, {170, 130}};

struct Whole {
  int64_t b = 2, a = 3, S = 300, d = 16, bh = 6;
  std::vector<float> q, k, v, ctx, lse, g, dq, dk, dv;
};

Whole whole_attention(float p, MathMode math, int64_t window) {
  Whole w;
  const int64_t n = w.bh * w.S * w.d;
  w.q = randn(n, "q");
  w.k = randn(n, "k");
  w.v = randn(n, "v");
  w.g = randn(n, "g");
  AttentionDims dm{w.b, w.a, w.S, w.d, math};
  dm.window_left = window;
  std::vector<float> ws(size_t(attention_workspace_floats(dm)));
  w.ctx.resize(size_t(n));
  w.lse.resize(size_t(w.bh * w.S));
  attention_forward(w.ctx.data(), w.lse.data(), w.q.data(), w.k.data(), w.v.data(), dm,
                    dropout(p), ws.data());
  w.dq.resize(size_t(n));
  w.dk.resize(size_t(n));
  w.dv.resize(size_t(n));
  attention_backward(w.dq.data(), w.dk.data(), w.dv.data(), w.g.data(), w.q.data(), w.k.data(),
                     w.v.data(), w.ctx.data(), w.lse.data(), dm, dropout(p), ws.data());
  return w;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", whole attention " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

void check_forward_blocks(float p, int64_t window = -1) {
  const Whole w = whole_attention(p, MathMode::kF32, window);
  std::vector<float> ctx(w.ctx.size(), 0.f), lse(w.lse.size(), 0.f);
  for (Range qr : kQueries) {
    std::vector<float> c(size_t(w.bh * qr.n * w.d), 0.f), l(size_t(w.bh * qr.n), kNegInf);
    const std::vector<float> q = take(w.q, w.bh, w.S, w.d, qr);
    for (Range kr : kKeys) {
      const AttentionDims dm = block_dims(w.b, w.a, w.d, w.S, qr, kr, MathMode::kF32, window);
      std::vector<float> ws(size_t(attention_workspace_floats(dm)));
      std::vector<float> cb(c.size(), std::nanf("")), lb(l.size(), std::nanf(""));
      attention_forward(cb.data(), lb.data(), q.data(), take(w.k, w.bh, w.S, w.d, kr).data(),
                        take(w.v, w.bh, w.S, w.d, kr).data(), dm, dropout(p), ws.data());
      // every key after every query, or before every query's window: nothing visible
      if (kr.p0 > qr.p0 + qr.n - 1 || (window >= 0 && kr.p0 + kr.n - 1 < qr.p0 - window)) {
        for (float x : cb) ASSERT_EQ(x, 0.f);
        for (float x : lb) ASSERT_EQ(x, kNegInf);
      }
      attention_merge(c.data(), l.data(), cb.data(), lb.data(), w.bh * qr.n, w.d);
    }
    add_rows(ctx, c, w.bh, w.S, w.d, qr);
    add_rows(lse, l, w.bh, w.S, 1, qr);
  }
  expect_close(ctx, w.ctx, 2e-5, "ctx");
  expect_close(lse, w.lse, 2e-6, "lse");
}

TEST(AttentionBlocks, ForwardMergedEqualsWhole) { check_forward_blocks(0.f); }
TEST(AttentionBlocks, ForwardWithDropoutMergedEqualsWhole) { check_forward_blocks(0.25f); }
// Windows shorter than a key range (whole ranges then fall outside) and longer.
TEST(AttentionBlocks, WindowedForwardMergedEqualsWhole) {
  for (int64_t window : {int64_t(0), int64_t(30), int64_t(100), int64_t(200)}) check_forward_blocks(0.25f, window);
}

// Every (query range, key range) pair's backward, given the whole row's lse
// and D, summed: the whole attention's dq, dk, dv.
void check_backward_blocks(float p, MathMode math, double tol, int64_t window = -1) {
  const Whole w = whole_attention(p, MathMode::kF32, window);
  std::vector<float> dsum(w.lse.size());
  attention_row_dsum(dsum.data(), w.g.data(), w.ctx.data(), w.bh * w.S, w.d);
  std::vector<float> dq(w.dq.size(), 0.f), dk(dq), dv(dq);
  for (Range qr : kQueries)
    for (Range kr : kKeys) {
      const AttentionDims dm = block_dims(w.b, w.a, w.d, w.S, qr, kr, math, window);
      std::vector<float> ws(size_t(attention_workspace_floats(dm)));
      std::vector<float> dqb(size_t(w.bh * qr.n * w.d), std::nanf(""));
      std::vector<float> dkb(size_t(w.bh * kr.n * w.d), std::nanf("")), dvb(dkb);
      const std::vector<float> k = take(w.k, w.bh, w.S, w.d, kr), v = take(w.v, w.bh, w.S, w.d, kr);
      attention_backward(dqb.data(), dkb.data(), dvb.data(), take(w.g, w.bh, w.S, w.d, qr).data(),
                         take(w.q, w.bh, w.S, w.d, qr).data(), k.data(), v.data(), ReadView{},
                         take(w.lse, w.bh, w.S, 1, qr).data(), dm, dropout(p), ws.data(),
                         take(dsum, w.bh, w.S, 1, qr).data());
      add_rows(dq, dqb, w.bh, w.S, w.d, qr);
      add_rows(dk, dkb, w.bh, w.S, w.d, kr);
      add_rows(dv, dvb, w.bh, w.S, w.d, kr);
    }
  expect_close(dq, w.dq, tol, "dq");
  expect_close(dk, w.dk, tol, "dk");
  expect_close(dv, w.dv, tol, "dv");
}

TEST(AttentionBlocks, BackwardSummedEqualsWhole) {
  check_backward_blocks(0.f, MathMode::kF32, 2e-5);
  check_backward_blocks(0.25f, MathMode::kF32, 2e-5);
}

TEST(AttentionBlocks, WindowedBackwardSummedEqualsWhole) {
  for (int64_t window : {int64_t(0), int64_t(30), int64_t(100), int64_t(200)}) check_backward_blocks(0.25f, MathMode::kF32, 2e-5, window);
  check_backward_blocks(0.25f, MathMode::kBF16, 3e-2, 30);
}

// bf16 operands: the blocks' sum stays within bf16 rounding of the fp32 whole.
TEST(AttentionBlocks, Bf16BackwardSummedIsCloseToWhole) {
  check_backward_blocks(0.25f, MathMode::kBF16, 3e-2);
}

TEST(AttentionBlocks, MergeTakesTheOtherSideOfAnEmptyRow) {
  std::vector<float> ctx = {0.f, 0.f, 1.f, 2.f}, lse = {kNegInf, 0.5f};
  const std::vector<float> cb = {3.f, 4.f, 5.f, 6.f}, lb = {0.25f, kNegInf};
  attention_merge(ctx.data(), lse.data(), cb.data(), lb.data(), 2, 2);
  EXPECT_EQ(ctx, (std::vector<float>{3.f, 4.f, 1.f, 2.f}));
  EXPECT_EQ(lse, (std::vector<float>{0.25f, 0.5f}));
}

TEST(AttentionBlocks, RejectsPositionsOutsideTheSequence) {
  AttentionDims dm{1, 1, 8, 4, MathMode::kF32};
  dm.sk = 8;
  dm.q_pos0 = 4;
  dm.s_global = 10;  // queries [4, 12) do not fit
  std::vector<float> x(64), ws(size_t(attention_workspace_floats(dm)));
  EXPECT_THROW(attention_forward(x.data(), x.data(), x.data(), x.data(), x.data(), dm, {}, ws.data()),
               Error);
}

}  // namespace attention_blocks_test
}  // namespace mt
