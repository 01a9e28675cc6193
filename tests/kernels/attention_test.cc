#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/dropout.h"

namespace mt {
namespace attention_test {

using test::randn;

// Double-precision reference with the full (s, s) softmax per head; key ki
// is visible to query qi when qi - window_left <= ki <= qi (no lower bound
// without a window) and, with documents, ki >= doc_start[bi][qi].
// q, k: (b, a, s, d); v, ctx: (b, a, s, dv); lse: (b, a, s).
void attention_ref(std::vector<double>* ctx, std::vector<double>* lse, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   const AttentionDims& dm, const AttentionDropout& drop) {
  const int64_t s = dm.s, d = dm.d, dv = attention_dv(dm);
  const int64_t a_global = drop.a_global > 0 ? drop.a_global : dm.a;
  const double scale = 1.0 / std::sqrt(double(d));
  ctx->assign(size_t(dm.b * dm.a * s * dv), 0.0);
  if (lse) lse->assign(size_t(dm.b * dm.a * s), 0.0);
  std::vector<double> p(static_cast<size_t>(s));
  for (int64_t bi = 0; bi < dm.b; ++bi)
    for (int64_t j = 0; j < dm.a; ++j) {
      const int64_t h = bi * dm.a + j;
      for (int64_t qi = 0; qi < s; ++qi) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t ki = 0; ki < s; ++ki) {
          double dot = 0;
          for (int64_t t = 0; t < d; ++t)
            dot += q[size_t((h * s + qi) * d + t)] * k[size_t((h * s + ki) * d + t)];
          const bool seen = ki <= qi && (dm.window_left < 0 || ki >= qi - dm.window_left) &&
                            (!dm.doc_start || ki >= dm.doc_start[bi * s + qi]);
          p[size_t(ki)] = seen ? dot * scale : -std::numeric_limits<double>::infinity();
          mx = std::max(mx, p[size_t(ki)]);
        }
        double sum = 0;
        for (int64_t ki = 0; ki < s; ++ki) sum += std::exp(p[size_t(ki)] - mx);
        if (lse) (*lse)[size_t(h * s + qi)] = mx + std::log(sum);
        for (int64_t ki = 0; ki < s; ++ki) {
          double pr = std::exp(p[size_t(ki)] - mx) / sum;
          if (drop.p > 0 && pr > 0) {
            const uint64_t index =
                uint64_t((((drop.sample0 + bi) * a_global + drop.head0 + j) * s + qi) * s + ki);
            pr = dropout_keep(drop.rng, drop.p, index) ? pr / (1.0 - drop.p) : 0.0;
          }
          for (int64_t t = 0; t < dv; ++t)
            (*ctx)[size_t((h * s + qi) * dv + t)] += pr * v[size_t((h * s + ki) * dv + t)];
        }
      }
    }
}

AttentionDropout make_dropout(float p, int64_t sample0 = 3, int64_t head0 = 1) {
  AttentionDropout drop;
  drop.rng = RngStream::make(7, "attention_dropout", /*step=*/3);
  drop.p = p;
  drop.sample0 = sample0;  // a shard of a larger batch and of more heads
  drop.a_global = 5;
  drop.head0 = head0;
  return drop;
}

// Workspace with a canary tail that must survive (attention_workspace_floats is enough).
struct Workspace {
  static constexpr int64_t kCanary = 1024;
  std::vector<float> buf;
  int64_t n;
  explicit Workspace(const AttentionDims& dm)
      : buf(size_t(attention_workspace_floats(dm) + kCanary), -7.f),
        n(attention_workspace_floats(dm)) {}
  float* data() { return buf.data(); }
  void expect_canary_intact() const {
    for (int64_t i = n; i < n + kCanary; ++i) ASSERT_EQ(buf[size_t(i)], -7.f) << "overrun at " << i;
  }
};

void check_forward(const AttentionDims& dm, const AttentionDropout& drop) {
  const int64_t n = dm.b * dm.a * dm.s * dm.d, nv = dm.b * dm.a * dm.s * attention_dv(dm);
  auto q = randn(n, "q"), k = randn(n, "k"), v = randn(nv, "v");
  std::vector<float> ctx(static_cast<size_t>(nv), std::nanf("")),
      lse(size_t(dm.b * dm.a * dm.s), std::nanf(""));
  Workspace ws(dm);
  attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, drop, ws.data());
  ws.expect_canary_intact();
  std::vector<double> ref_ctx, ref_lse;
  attention_ref(&ref_ctx, &ref_lse, test::to_double(q), test::to_double(k), test::to_double(v), dm,
                drop);
  int bad = 0;
  for (size_t i = 0; i < ctx.size(); ++i)
    if (!(std::fabs(ctx[i] - ref_ctx[i]) <= 2e-5 + 1e-4 * std::fabs(ref_ctx[i])) && bad++ < 5)
      ADD_FAILURE() << "ctx[" << i << "] = " << ctx[i] << ", expected " << ref_ctx[i];
  for (size_t i = 0; i < lse.size(); ++i)
    if (!(std::fabs(lse[i] - ref_lse[i]) <= 2e-5 + 1e-5 * std::fabs(ref_lse[i])) && bad++ < 5)
      ADD_FAILURE() << "lse[" << i << "] = " << lse[i] << ", expected " << ref_lse[i];
  EXPECT_EQ(bad, 0) << "s=" << dm.s << " p=" << drop.p;
}

TEST(Attention, ForwardMatchesReferenceAcrossBlocks) {
  check_forward({2, 3, 200, 16}, {});                  // two query blocks, the last one short
  check_forward({1, 2, 2 * kAttentionBlockQ, 8}, {});  // exact multiple of the block
}

TEST(Attention, ForwardMatchesReferenceShorterThanBlock) { check_forward({2, 3, 50, 16}, {}); }

TEST(Attention, ForwardWithDropoutUsesTheGlobalMask) {
  test::for_each_isa([](Isa) {  // the mask on every CPU path
    check_forward({2, 3, 200, 16}, make_dropout(0.2f));
    check_forward({1, 3, 37, 8}, make_dropout(0.2f));
  });
}

TEST(Attention, DropoutMaskAcrossA32BitBlockCounterCarry) {
  // Element index 2^34, where the Philox block counter (index / 4) carries from
  // its low into its high 32-bit word (long runs get there), placed on a
  // visible (unmasked) score of the tested heads: s = 25, a_global = 5.
  const AttentionDims dm{2, 3, 25, 8};
  const int64_t per_sample = 5 * dm.s * dm.s;  // a_global * s * s
  const int64_t sample0 = (int64_t(1) << 34) / per_sample;
  const int64_t offset = (int64_t(1) << 34) - sample0 * per_sample;
  const int64_t head = offset / (dm.s * dm.s), qi = offset / dm.s % dm.s, ki = offset % dm.s;
  ASSERT_TRUE(head < dm.a && ki <= qi) << "index 2^34 is at head " << head << " query " << qi
                                       << " key " << ki << ", not a visible tested score";
  test::for_each_isa([&](Isa) { check_forward(dm, make_dropout(0.2f, sample0, /*head0=*/0)); });
}

TEST(Attention, ForwardRowsDoNotDependOnLaterBlocks) {
  // Causality and blocking: the first block of an s=200 run equals an s=128
  // run on the first 128 positions (a single block that sees exactly those keys).
  const AttentionDims big{1, 2, 200, 16}, small{1, 2, kAttentionBlockQ, 16};
  const int64_t n = big.b * big.a * big.s * big.d;
  auto q = randn(n, "q"), k = randn(n, "k"), v = randn(n, "v");
  auto head_prefix = [&](const std::vector<float>& x) {
    std::vector<float> y;
    for (int64_t h = 0; h < big.a; ++h)
      y.insert(y.end(), x.begin() + h * big.s * big.d, x.begin() + (h * big.s + small.s) * big.d);
    return y;
  };
  auto qs = head_prefix(q), ks = head_prefix(k), vs = head_prefix(v);
  std::vector<float> ctx(static_cast<size_t>(n)), lse(size_t(big.a * big.s));
  std::vector<float> ctx_s(qs.size()), lse_s(size_t(small.a * small.s));
  Workspace ws(big), ws_s(small);
  attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), big, {}, ws.data());
  attention_forward(ctx_s.data(), lse_s.data(), qs.data(), ks.data(), vs.data(), small, {},
                    ws_s.data());
  auto ctx_prefix = head_prefix(ctx);
  for (size_t i = 0; i < ctx_s.size(); ++i) EXPECT_NEAR(ctx_prefix[i], ctx_s[i], 1e-6) << i;
}

// Checks attention_backward against central differences of the double
// reference, for L = Σ ctx ⊙ g, on every `stride`-th coordinate of q, k, v.
void check_backward(const AttentionDims& dm, float p, int64_t stride) {
  const int64_t n = dm.b * dm.a * dm.s * dm.d, nv = dm.b * dm.a * dm.s * attention_dv(dm);
  auto q = randn(n, "q"), k = randn(n, "k"), v = randn(nv, "v");
  auto g = randn(nv, "g");
  const AttentionDropout drop = make_dropout(p);
  std::vector<float> ctx(static_cast<size_t>(nv)), lse(size_t(dm.b * dm.a * dm.s));
  Workspace ws(dm);
  attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, drop, ws.data());
  // dq, dk, dv are `=`: start them as NaN.
  std::vector<float> dq(static_cast<size_t>(n), std::nanf("")), dk(dq),
      dv(static_cast<size_t>(nv), std::nanf(""));
  attention_backward(dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(), v.data(),
                     ctx.data(), lse.data(), dm, drop, ws.data());
  ws.expect_canary_intact();

  std::vector<double> qd = test::to_double(q), kd = test::to_double(k), vd = test::to_double(v);
  auto loss = [&]() {
    std::vector<double> c;
    attention_ref(&c, nullptr, qd, kd, vd, dm, drop);
    double l = 0;
    for (size_t i = 0; i < c.size(); ++i) l += c[i] * g[i];
    return l;
  };
  auto check = [&](std::vector<double>& x, const std::vector<float>& grad, const char* name) {
    std::vector<float> analytic;
    std::vector<double> numeric;
    const double step = 1e-5;
    const int64_t len = int64_t(x.size());
    for (int64_t i = (stride / 2) % len; i < len; i += stride) {
      const double keep = x[size_t(i)];
      x[size_t(i)] = keep + step;
      const double lp = loss();
      x[size_t(i)] = keep - step;
      const double lm = loss();
      x[size_t(i)] = keep;
      numeric.push_back((lp - lm) / (2 * step));
      analytic.push_back(grad[size_t(i)]);
    }
    test::expect_grad_close(analytic, numeric, 1e-4, 1e-3, name);
  };
  check(qd, dq, "dq");
  check(kd, dk, "dk");
  check(vd, dv, "dv");
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  check_backward({1, 2, kAttentionBlockQ + 22, 8}, 0.f, 7);
  check_backward({2, 1, 30, 8}, 0.f, 3);  // shorter than a block
}

TEST(Attention, BackwardWithDropoutMatchesFiniteDifferences) {
  check_backward({1, 2, kAttentionBlockQ + 22, 8}, 0.2f, 7);
}

// Forward and backward with dropout on every CPU path (kernels/cpu_isa.h)
// equal the scalar path's to 1e-6 relative (bit for bit today: the paths
// differ only in how the mask's Philox blocks are drawn).
TEST(Attention, DropoutGivesTheSameNumbersOnEveryCpuPath) {
  const AttentionDims dm{2, 3, kAttentionBlockQ + 37, 16};
  const AttentionDropout drop = make_dropout(0.2f);
  const int64_t n = dm.b * dm.a * dm.s * dm.d;
  auto q = randn(n, "q"), k = randn(n, "k"), v = randn(n, "v"), g = randn(n, "g");
  std::vector<std::vector<float>> scalar;  // ctx, lse, dq, dk, dv
  test::for_each_isa([&](Isa isa) {
    std::vector<float> ctx(static_cast<size_t>(n)), lse(size_t(dm.b * dm.a * dm.s));
    std::vector<float> dq(ctx.size()), dk(ctx.size()), dv(ctx.size());
    Workspace ws(dm);
    attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, drop, ws.data());
    attention_backward(dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(), v.data(),
                       ctx.data(), lse.data(), dm, drop, ws.data());
    std::vector<std::vector<float>> out = {ctx, lse, dq, dk, dv};
    if (isa == Isa::kScalar) return scalar = out, void();
    const char* names[] = {"ctx", "lse", "dq", "dk", "dv"};
    for (size_t t = 0; t < out.size(); ++t)
      for (size_t i = 0; i < out[t].size(); ++i)
        ASSERT_NEAR(out[t][i], scalar[t][i], 1e-6 * std::max(1.f, std::fabs(scalar[t][i])))
            << names[t] << "[" << i << "]";
  });
}

// Sliding window (Megatron's --window-size L,0): L = 0 (itself only), windows
// inside one query block, across the block boundary and longer than the sequence.
AttentionDims windowed(AttentionDims dm, int64_t window) {
  dm.window_left = window;
  return dm;
}

TEST(Attention, WindowedForwardMatchesReference) {
  for (int64_t w : {int64_t(0), int64_t(5), int64_t(40), kAttentionBlockQ + 10, int64_t(400)}) {
    check_forward(windowed({2, 3, 200, 16}, w), {});
    check_forward(windowed({1, 3, 200, 8}, w), make_dropout(0.2f));
  }
}

TEST(Attention, WindowedBackwardMatchesFiniteDifferences) {
  for (int64_t w : {int64_t(1), kAttentionBlockQ + 5})  // (L = 0: P = 1, no dq, dk)
    check_backward(windowed({1, 2, kAttentionBlockQ + 22, 8}, w), 0.f, 7);
  check_backward(windowed({1, 2, kAttentionBlockQ + 22, 8}, 17), 0.2f, 7);
  check_backward(windowed({2, 1, 30, 8}, 4), 0.f, 3);
}

// Documents inside a sequence (--reset-attention-mask): each sample its own
// boundaries — a document of one token, one ending at a query block's edge,
// one spanning it, the last running to the end — so a block's samples see
// different key ranges.
struct Documents {
  std::vector<int32_t> starts;  // (b, s)
  Documents(int64_t b, int64_t s) : starts(size_t(b * s)) {
    for (int64_t bi = 0; bi < b; ++bi) {
      const std::vector<int64_t> cuts = bi % 2 == 0
          ? std::vector<int64_t>{7, 8, kAttentionBlockQ, s - 3}
          : std::vector<int64_t>{kAttentionBlockQ - 20, kAttentionBlockQ + 9};
      int64_t start = 0;
      for (int64_t t = 0; t < s; ++t) {
        for (int64_t c : cuts)
          if (c == t) start = t;
        starts[size_t(bi * s + t)] = int32_t(start);
      }
    }
  }
};

AttentionDims with_documents(AttentionDims dm, const Documents& docs) {
  dm.doc_start = docs.starts.data();
  return dm;
}

TEST(Attention, DocumentsForwardMatchesReference) {
  const Documents docs(3, 200);
  check_forward(with_documents({3, 2, 200, 16}, docs), {});
  check_forward(with_documents({3, 2, 200, 8}, docs), make_dropout(0.2f));
  check_forward(with_documents(windowed({3, 2, 200, 8}, 30), docs), {});
}

TEST(Attention, DocumentsBackwardMatchesFiniteDifferences) {
  const Documents docs(2, kAttentionBlockQ + 22);
  check_backward(with_documents({2, 1, kAttentionBlockQ + 22, 8}, docs), 0.f, 13);
  check_backward(with_documents({2, 1, kAttentionBlockQ + 22, 8}, docs), 0.2f, 19);
}

TEST(Attention, OneDocumentPerSampleIsPlainCausal) {
  // doc_start all 0 hides nothing: the same bits as no document mask.
  const AttentionDims dm{2, 2, 150, 8};
  const int64_t n = dm.b * dm.a * dm.s * dm.d;
  const auto q = randn(n, "q"), k = randn(n, "k"), v = randn(n, "v");
  const std::vector<int32_t> zeros(size_t(dm.b * dm.s), 0);
  AttentionDims docs = dm;
  docs.doc_start = zeros.data();
  std::vector<float> c0(static_cast<size_t>(n)), c1(c0), l0(static_cast<size_t>(dm.b * dm.a * dm.s)), l1(l0);
  Workspace w0(dm), w1(docs);
  attention_forward(c0.data(), l0.data(), q.data(), k.data(), v.data(), dm, {}, w0.data());
  attention_forward(c1.data(), l1.data(), q.data(), k.data(), v.data(), docs, {}, w1.data());
  EXPECT_EQ(c0, c1);
  EXPECT_EQ(l0, l1);
}

// ||x - y|| / ||y|| over all elements.
double rel_dist(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(y[i]) * y[i];
  }
  return std::sqrt(num / den);
}

// Forward and backward with dims.math = `math` against the fp32 kernels on the
// same inputs: every output within max_rel (norm-wise) of fp32, and at least
// min_rel away from it (the matmuls really ran in low precision).
void check_mixed(AttentionDims dm, float p, MathMode math, double min_rel, double max_rel) {
  const int64_t n = dm.b * dm.a * dm.s * dm.d, rows = dm.b * dm.a * dm.s;
  const int64_t nv = rows * attention_dv(dm);
  const auto q = randn(n, "q"), k = randn(n, "k"), v = randn(nv, "v"), g = randn(nv, "g");
  const AttentionDropout drop = make_dropout(p);
  struct Out {
    std::vector<float> ctx, lse, dq, dk, dv;
  };
  auto run = [&](MathMode m) {
    dm.math = m;
    Out o{std::vector<float>(size_t(nv)), std::vector<float>(size_t(rows)),
          std::vector<float>(size_t(n), std::nanf("")), std::vector<float>(size_t(n), std::nanf("")),
          std::vector<float>(size_t(nv), std::nanf(""))};
    Workspace ws(dm);
    attention_forward(o.ctx.data(), o.lse.data(), q.data(), k.data(), v.data(), dm, drop,
                      ws.data());
    attention_backward(o.dq.data(), o.dk.data(), o.dv.data(), g.data(), q.data(), k.data(),
                       v.data(), o.ctx.data(), o.lse.data(), dm, drop, ws.data());
    ws.expect_canary_intact();
    return o;
  };
  const Out ref = run(MathMode::kF32), low = run(math);
  const std::pair<const char*, double> dist[] = {
      {"ctx", rel_dist(low.ctx, ref.ctx)}, {"lse", rel_dist(low.lse, ref.lse)},
      {"dq", rel_dist(low.dq, ref.dq)},    {"dk", rel_dist(low.dk, ref.dk)},
      {"dv", rel_dist(low.dv, ref.dv)}};
  for (const auto& [name, d] : dist) {
    EXPECT_LT(d, max_rel) << name << " in " << math_mode_name(math) << " vs fp32, p=" << p;
    EXPECT_GT(d, min_rel) << name << " in " << math_mode_name(math)
                          << " is (nearly) the fp32 result: the matmuls did not run in it";
  }
}

TEST(Attention, Bf16IsCloseToFp32) {
  // Measured: ctx, dq, dk, dv 3e-3 .. 5e-3 (bf16 keeps 8 significant bits), lse 2e-4.
  check_mixed({2, 3, 200, 16}, 0.f, MathMode::kBF16, 5e-5, 2e-2);
  check_mixed({1, 2, 150, 8}, 0.2f, MathMode::kBF16, 5e-5, 2e-2);
  check_mixed(windowed({1, 2, 150, 8}, 20), 0.2f, MathMode::kBF16, 5e-5, 2e-2);
  const Documents docs(2, 150);
  check_mixed(with_documents({2, 2, 150, 8}, docs), 0.2f, MathMode::kBF16, 5e-5, 2e-2);
}

// v and ctx heads of dv != d (multi-latent attention's shape): P·v and its
// gradients on dv columns, the scale 1/sqrt(d) of the q·k features.
AttentionDims with_dv(AttentionDims dm, int64_t dv) {
  dm.dv = dv;
  return dm;
}

TEST(Attention, NarrowerValuesMatchReference) {
  check_forward(with_dv({2, 3, 200, 16}, 10), {});
  check_forward(with_dv({1, 2, 150, 12}, 20), make_dropout(0.2f));  // wider values too
  check_forward(with_dv(windowed({1, 2, 150, 8}, 20), 6), make_dropout(0.2f));
}

TEST(Attention, NarrowerValuesBackwardMatchesFiniteDifferences) {
  check_backward(with_dv({1, 2, kAttentionBlockQ + 22, 8}, 6), 0.f, 7);
  check_backward(with_dv({1, 2, kAttentionBlockQ + 22, 8}, 6), 0.2f, 7);
  check_backward(with_dv({2, 1, 30, 6}, 10), 0.f, 3);
}

TEST(Attention, NarrowerValuesInBf16AndFp16AreCloseToFp32) {
  check_mixed(with_dv({2, 3, 200, 16}, 10), 0.2f, MathMode::kBF16, 5e-5, 2e-2);
  check_mixed(with_dv({2, 3, 200, 16}, 10), 0.2f, MathMode::kF16, 5e-6, 2e-3);
}

// dv != d equals the former way (v zero-padded to d columns, ctx's padding
// columns 0) to round-off, in fp32 and bf16 math (the padding adds only
// zeros to every product), with and without a precomputed row_dsum.
TEST(Attention, NarrowerValuesEqualZeroPaddedValues) {
  for (const MathMode math : {MathMode::kF32, MathMode::kBF16}) {
    AttentionDims dm{2, 3, 200, 12};
    dm.math = math;
    const int64_t dv = 8, rows = dm.b * dm.a * dm.s, n = rows * dm.d, nv = rows * dv;
    const auto q = randn(n, "q"), k = randn(n, "k"), v = randn(nv, "v"), g = randn(nv, "g");
    const AttentionDropout drop = make_dropout(0.2f);
    auto pad = [&](const std::vector<float>& x) {  // rows of dv → rows of d, zeros after
      std::vector<float> out(size_t(n), 0.f);
      for (int64_t r = 0; r < rows; ++r) std::copy_n(&x[size_t(r * dv)], dv, &out[size_t(r * dm.d)]);
      return out;
    };
    auto unpad = [&](const std::vector<float>& x) {
      std::vector<float> out(static_cast<size_t>(nv));
      for (int64_t r = 0; r < rows; ++r) std::copy_n(&x[size_t(r * dm.d)], dv, &out[size_t(r * dv)]);
      return out;
    };
    struct Out {
      std::vector<float> ctx, lse, dq, dk, dv;
    };
    auto run = [&](const AttentionDims& d, const std::vector<float>& vv,
                   const std::vector<float>& gg, bool with_dsum) {
      const int64_t w = attention_dv(d);
      Out o{std::vector<float>(size_t(rows * w)), std::vector<float>(size_t(rows)),
            std::vector<float>(size_t(n)), std::vector<float>(size_t(n)),
            std::vector<float>(size_t(rows * w))};
      Workspace ws(d);
      attention_forward(o.ctx.data(), o.lse.data(), q.data(), k.data(), vv.data(), d, drop,
                        ws.data());
      std::vector<float> dsum(static_cast<size_t>(rows));
      attention_row_dsum(dsum.data(), gg.data(), o.ctx.data(), rows, w);
      attention_backward(o.dq.data(), o.dk.data(), o.dv.data(), gg.data(), q.data(), k.data(),
                         vv.data(), o.ctx.data(), o.lse.data(), d, drop, ws.data(),
                         with_dsum ? dsum.data() : nullptr);
      ws.expect_canary_intact();
      return o;
    };
    for (const bool with_dsum : {false, true}) {
      SCOPED_TRACE(std::string(math_mode_name(math)) + (with_dsum ? " row_dsum" : ""));
      const Out narrow = run(with_dv(dm, dv), v, g, with_dsum);
      const Out padded = run(dm, pad(v), pad(g), with_dsum);
      const double tol = 1e-6;
      EXPECT_LT(rel_dist(narrow.ctx, unpad(padded.ctx)), tol);
      EXPECT_LT(rel_dist(narrow.lse, padded.lse), tol);
      EXPECT_LT(rel_dist(narrow.dq, padded.dq), tol);
      EXPECT_LT(rel_dist(narrow.dk, padded.dk), tol);
      EXPECT_LT(rel_dist(narrow.dv, unpad(padded.dv)), tol);
      const std::vector<float> ctx_pad = unpad(padded.ctx);
      double pad_cols = 0;  // the padded ctx's extra columns are exactly 0
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = dv; t < dm.d; ++t) pad_cols += std::fabs(padded.ctx[size_t(r * dm.d + t)]);
      EXPECT_EQ(pad_cols, 0.0);
    }
  }
}

TEST(Attention, Fp16IsCloserToFp32ThanBf16) {
  // Measured: 4e-4 .. 6e-4 (11 significant bits), lse 3e-5.
  check_mixed({2, 3, 200, 16}, 0.f, MathMode::kF16, 5e-6, 2e-3);
  check_mixed({1, 2, 150, 8}, 0.2f, MathMode::kF16, 5e-6, 2e-3);
  check_mixed(windowed({1, 2, 150, 8}, 20), 0.2f, MathMode::kF16, 5e-6, 2e-3);
}

TEST(Attention, ExplicitFp32MathStillMatchesFiniteDifferences) {
  AttentionDims dm{1, 2, kAttentionBlockQ + 22, 8};
  dm.math = MathMode::kF32;
  check_backward(dm, 0.f, 11);
}

TEST(Attention, RejectsBadArguments) {
  const AttentionDims dm{1, 1, 4, 4};
  std::vector<float> x(64), ws(size_t(attention_workspace_floats(dm)));
  AttentionDropout drop;
  drop.p = 1.f;
  EXPECT_THROW(
      attention_forward(x.data(), x.data(), x.data(), x.data(), x.data(), dm, drop, ws.data()),
      Error);
  drop.p = 0.1f;
  drop.a_global = 4;
  drop.head0 = 4;  // heads [4, 5) of 4
  EXPECT_THROW(
      attention_forward(x.data(), x.data(), x.data(), x.data(), x.data(), dm, drop, ws.data()),
      Error);
  EXPECT_THROW(attention_forward(x.data(), x.data(), x.data(), x.data(), x.data(), {1, 0, 4, 4}, {},
                                 ws.data()),
               Error);
  EXPECT_THROW(attention_forward(x.data(), x.data(), x.data(), x.data(), x.data(),
                                 with_dv(dm, -1), {}, ws.data()),
               Error);
}

}  // namespace attention_test
}  // namespace mt
