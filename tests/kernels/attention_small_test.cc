#include "kernels/attention_small.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace mt {
namespace attention_small_test {

using test::randn;

// Double-precision causal attention, the full (s, s) softmax per head.
// q, k, v, ctx: (b, a, s, d).
std::vector<double> causal_ref(const std::vector<double>& q, const std::vector<double>& k,
                               const std::vector<double>& v, const AttentionDims& dm) {
  const int64_t s = dm.s, d = dm.d;
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<double> ctx(size_t(dm.b * dm.a * s * d), 0.0), p(static_cast<size_t>(s));
  for (int64_t h = 0; h < dm.b * dm.a; ++h)
    for (int64_t qi = 0; qi < s; ++qi) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t ki = 0; ki <= qi; ++ki) {
        double dot = 0;
        for (int64_t t = 0; t < d; ++t)
          dot += q[size_t((h * s + qi) * d + t)] * k[size_t((h * s + ki) * d + t)];
        p[size_t(ki)] = dot * scale;
        mx = std::max(mx, p[size_t(ki)]);
      }
      for (int64_t ki = 0; ki <= qi; ++ki) sum += std::exp(p[size_t(ki)] - mx);
      for (int64_t ki = 0; ki <= qi; ++ki)
        for (int64_t t = 0; t < d; ++t)
          ctx[size_t((h * s + qi) * d + t)] +=
              std::exp(p[size_t(ki)] - mx) / sum * v[size_t((h * s + ki) * d + t)];
    }
  return ctx;
}

// Scratch for every thread of the small path (NaN-filled: it must write
// before it reads).
std::vector<float> scratch_for(const AttentionDims& dm) {
  return std::vector<float>(size_t(omp_get_max_threads() * attention_small_thread_floats(dm)) + 64,
                            std::nanf(""));
}

// The small path on `isa` against the batched path (attention.cc, on the
// scalar path: oneDNN products), forward and backward, to fp32 round-off.
void check_against_batched(const AttentionDims& dm, Isa isa, bool with_row_dsum) {
  const int64_t n = dm.b * dm.a * dm.s * dm.d, rows = dm.b * dm.a * dm.s;
  const auto q = randn(n, "q"), k = randn(n, "k"), v = randn(n, "v"), g = randn(n, "g");
  std::vector<float> ctx_ref(static_cast<size_t>(n)), lse_ref(static_cast<size_t>(rows)),
      dq_ref(static_cast<size_t>(n)), dk_ref(static_cast<size_t>(n)),
      dv_ref(static_cast<size_t>(n));
  {
    const Isa keep = set_isa_for_testing(Isa::kScalar);  // the small path declines: batched
    std::vector<float> ws(size_t(attention_workspace_floats(dm)));
    EXPECT_FALSE(attention_small_applies(dm, {}, int64_t(ws.size())));
    attention_forward(ctx_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), dm, {},
                      ws.data());
    attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), g.data(), q.data(), k.data(),
                       v.data(), ctx_ref.data(), lse_ref.data(), dm, {}, ws.data());
    set_isa_for_testing(keep);
  }
  std::vector<float> ws = scratch_for(dm);
  std::vector<float> ctx(size_t(n), std::nanf("")), lse(size_t(rows), std::nanf(""));
  attention_small_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, ws.data(), isa);
  std::vector<float> dsum(static_cast<size_t>(rows));
  attention_row_dsum(dsum.data(), g.data(), ctx.data(), rows, dm.d);
  std::vector<float> dq(size_t(n), std::nanf("")), dk(dq), dv(dq);
  attention_small_backward(dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(), v.data(),
                           with_row_dsum ? nullptr : ctx.data(), lse.data(),
                           with_row_dsum ? dsum.data() : nullptr, dm, ws.data(), isa);
  auto expect_close = [&](const std::vector<float>& x, const std::vector<float>& ref,
                          const char* name) {
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (!(std::fabs(x[i] - ref[i]) <= 2e-5 + 1e-4 * std::fabs(ref[i])) && bad++ < 5)
        ADD_FAILURE() << name << "[" << i << "] = " << x[i] << ", batched " << ref[i] << " ("
                      << isa_name(isa) << ", s=" << dm.s << " d=" << dm.d << ")";
  };
  expect_close(ctx, ctx_ref, "ctx");
  expect_close(lse, lse_ref, "lse");
  expect_close(dq, dq_ref, "dq");
  expect_close(dk, dk_ref, "dk");
  expect_close(dv, dv_ref, "dv");
}

TEST(AttentionSmall, EveryPathMatchesTheBatchedPath) {
  for (const Isa isa : supported_isas()) {
    check_against_batched({12, 4, 64, 32}, isa, false);  // config (a)'s layer
    check_against_batched({2, 3, 50, 16}, isa, true);    // padded sequence and head
    check_against_batched({1, 2, 37, 40}, isa, false);   // head over one register pair
    check_against_batched({1, 1, 1, 8}, isa, false);     // one query
    check_against_batched({1, 2, 130, 64}, isa, true);   // longer than a batched block
  }
}

// dq, dk, dv against central differences of the double reference, for
// L = Σ ctx ⊙ g, on every `stride`-th coordinate, on every path.
TEST(AttentionSmall, BackwardMatchesFiniteDifferences) {
  const AttentionDims dm{2, 1, 21, 8};
  const int64_t n = dm.b * dm.a * dm.s * dm.d, stride = 5;
  const auto q = randn(n, "q"), k = randn(n, "k"), v = randn(n, "v"), g = randn(n, "g");
  std::vector<double> qd = test::to_double(q), kd = test::to_double(k), vd = test::to_double(v);
  auto loss = [&] {
    const std::vector<double> c = causal_ref(qd, kd, vd, dm);
    double l = 0;
    for (size_t i = 0; i < c.size(); ++i) l += c[i] * g[i];
    return l;
  };
  for (const Isa isa : supported_isas()) {
    std::vector<float> ws = scratch_for(dm), ctx(static_cast<size_t>(n)),
                       lse(static_cast<size_t>(dm.b * dm.a * dm.s));
    attention_small_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, ws.data(),
                            isa);
    std::vector<float> dq(static_cast<size_t>(n)), dk(dq), dv(dq);
    attention_small_backward(dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(),
                             v.data(), ctx.data(), lse.data(), nullptr, dm, ws.data(), isa);
    auto check = [&](std::vector<double>& x, const std::vector<float>& grad, const char* name) {
      std::vector<float> analytic;
      std::vector<double> numeric;
      const double step = 1e-5;
      for (int64_t i = stride / 2; i < n; i += stride) {
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
}

// The dispatch: only the plain causal square in fp32 without dropout, and
// only with room for every thread's scratch in the caller's workspace.
TEST(AttentionSmall, AppliesOnlyToThePlainCausalSquare) {
  const AttentionDims dm{12, 4, 64, 32};
  const int64_t room = attention_workspace_floats(dm);
  if (active_isa() == Isa::kScalar) GTEST_SKIP() << "no vector path on this CPU";
  EXPECT_TRUE(attention_small_applies(dm, {}, room));
  EXPECT_FALSE(attention_small_applies(dm, {}, 0));  // no room
  AttentionDropout drop;
  drop.p = 0.1f;
  EXPECT_FALSE(attention_small_applies(dm, drop, room));
  auto with = [&](auto edit) {
    AttentionDims x = dm;
    edit(x);
    return attention_small_applies(x, {}, room);
  };
  EXPECT_FALSE(with([](AttentionDims& x) { x.math = MathMode::kBF16; }));
  EXPECT_FALSE(with([](AttentionDims& x) { x.window_left = 8; }));
  EXPECT_FALSE(with([](AttentionDims& x) { x.sk = 32; }));
  EXPECT_FALSE(with([](AttentionDims& x) { x.q_pos0 = 64, x.s_global = 128; }));
  EXPECT_FALSE(with([](AttentionDims& x) { x.dv = 16; }));
  EXPECT_TRUE(with([](AttentionDims& x) { x.dv = 32; }));
  static const int32_t starts[64] = {};
  EXPECT_FALSE(with([](AttentionDims& x) { x.b = 1, x.doc_start = starts; }));
}

}  // namespace attention_small_test
}  // namespace mt
