#include "kernels/moe_router.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace moe_router_test {

using test::randn;

// softmax of one row of E doubles.
std::vector<double> softmax_ref(const double* z, int64_t E) {
  double mx = z[0], sum = 0;
  for (int64_t e = 1; e < E; ++e) mx = std::max(mx, z[e]);
  std::vector<double> s(size_t(E), 0.0);
  for (int64_t e = 0; e < E; ++e) sum += s[e] = std::exp(z[e] - mx);
  for (double& v : s) v /= sum;
  return s;
}

double lse_ref(const double* z, int64_t E) {
  double mx = z[0], sum = 0;
  for (int64_t e = 1; e < E; ++e) mx = std::max(mx, z[e]);
  for (int64_t e = 0; e < E; ++e) sum += std::exp(z[e] - mx);
  return mx + std::log(sum);
}

// prob (n, k) in double for a fixed choice of experts: the router's output is
// piecewise smooth in the logits, and this is the piece the forward chose.
std::vector<double> prob_ref(const std::vector<double>& z, const std::vector<int32_t>& expert,
                             int64_t n, int64_t E, int64_t k, bool pre_softmax) {
  std::vector<double> p(size_t(n * k));
  for (int64_t t = 0; t < n; ++t) {
    const double* row = z.data() + t * E;
    const int32_t* idx = expert.data() + t * k;
    if (pre_softmax) {
      const auto s = softmax_ref(row, E);
      for (int64_t j = 0; j < k; ++j) p[t * k + j] = s[idx[j]];
    } else {
      std::vector<double> chosen(static_cast<size_t>(k));
      for (int64_t j = 0; j < k; ++j) chosen[j] = row[idx[j]];
      const auto s = softmax_ref(chosen.data(), k);
      for (int64_t j = 0; j < k; ++j) p[t * k + j] = s[j];
    }
  }
  return p;
}

struct Routed {
  std::vector<int32_t> expert;
  std::vector<float> prob, scores;
};

Routed route(const std::vector<float>& logits, int64_t n, int64_t E, int64_t k, bool pre) {
  Routed r{std::vector<int32_t>(n * k), std::vector<float>(n * k), std::vector<float>(n * E)};
  moe_topk_forward(r.expert.data(), r.prob.data(), r.scores.data(), logits.data(), n, E, k, pre);
  return r;
}

TEST(MoeRouter, TopkOrderAndTieBreak) {
  EXPECT_EQ(route({1, 3, 2, 0}, 1, 4, 2, false).expert, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(route({2, 5, 5, 1, 5}, 1, 5, 3, false).expert, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(route({2, 5, 5, 1, 5}, 1, 5, 2, false).expert, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(route({5, 1, 5, 5}, 1, 4, 2, false).expert, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(route({0, 0, 0, 0}, 1, 4, 3, false).expert, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(route({-1, 4, 0, 9}, 1, 4, 4, false).expert, (std::vector<int32_t>{3, 1, 2, 0}));
  // Two tokens, rows independent.
  EXPECT_EQ(route({0, 1, 2, 7, 6, 5}, 2, 3, 1, false).expert, (std::vector<int32_t>{2, 0}));
}

// The router's dtype: bf16 and fp16 give the nearest value of that format
// (ties to even), fp32 leaves every bit; rounding twice changes nothing.
TEST(MoeRouter, RoundsToTheRoutersDtype) {
  const std::vector<float> x = {1.0f, 1.00390625f /* 1 + 2^-8: a bf16 tie, to 1 */,
                                1.01171875f /* 1 + 3·2^-8: a tie, to 1 + 2^-6 */,
                                -3.14159265f, 1e-3f, 65504.f, 0.f};
  const std::vector<float> bf16 = {1.0f, 1.0f, 1.015625f, -3.140625f, 0.00099945068359375f,
                                   65536.f, 0.f};
  std::vector<float> y = x;
  moe_router_round(y.data(), int64_t(y.size()), MathMode::kBF16);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], bf16[i]) << x[i];
  std::vector<float> again = y;
  moe_router_round(again.data(), int64_t(y.size()), MathMode::kBF16);
  EXPECT_EQ(again, y);
  y = x;
  moe_router_round(y.data(), int64_t(y.size()), MathMode::kF16);
  EXPECT_EQ(y[1], 1.00390625f);  // exact in fp16 (10 fraction bits)
  EXPECT_EQ(y[3], -3.140625f);
  EXPECT_EQ(y[4], 0.0010004043579101562f);
  y = x;
  moe_router_round(y.data(), int64_t(y.size()), MathMode::kF32);
  EXPECT_EQ(std::memcmp(y.data(), x.data(), x.size() * sizeof(float)), 0);
}

TEST(MoeRouter, ProbsOnHandExample) {
  const std::vector<float> z = {1, 3, 2, 0};
  const double S = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(0.0);
  // Default: softmax over the chosen logits {3, 2}.
  const auto d = route(z, 1, 4, 2, false);
  const double e1 = std::exp(-1.0);
  EXPECT_NEAR(d.prob[0], 1 / (1 + e1), 1e-7);
  EXPECT_NEAR(d.prob[1], e1 / (1 + e1), 1e-7);
  // pre_softmax: the chosen entries of the softmax over all four, not renormalised.
  const auto p = route(z, 1, 4, 2, true);
  EXPECT_EQ(p.expert, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(p.prob[0], std::exp(3.0) / S, 1e-7);
  EXPECT_NEAR(p.prob[1], std::exp(2.0) / S, 1e-7);
  // scores are the full softmax in both modes.
  for (int e = 0; e < 4; ++e) {
    EXPECT_NEAR(d.scores[e], std::exp(double(z[e])) / S, 1e-7) << e;
    EXPECT_EQ(d.scores[e], p.scores[e]) << e;
  }
  // Large logits: max-subtracted, no overflow.
  const auto big = route({1000, 999, -1000}, 1, 3, 2, false);
  EXPECT_NEAR(big.prob[0], 1 / (1 + e1), 1e-7);
  EXPECT_NEAR(big.scores[2], 0.0, 1e-30);
}

TEST(MoeRouter, TopkBackwardFiniteDifference) {
  const int64_t n = 9, E = 7, k = 3;
  const auto logits = randn(n * E, "moe.bwd.logits", 2.f);
  const auto w = randn(n * k, "moe.bwd.w");  // dprob: the objective is Σ w·prob
  for (bool pre : {false, true}) {
    const auto r = route(logits, n, E, k, pre);
    auto dlogits = randn(n * E, "moe.bwd.garbage");  // overwritten, not accumulated
    moe_topk_backward(dlogits.data(), w.data(), r.expert.data(), r.prob.data(), r.scores.data(), n,
                      E, k, pre);
    const auto num = test::numeric_grad(
        [&](const std::vector<double>& z) {
          const auto p = prob_ref(z, r.expert, n, E, k, pre);
          double f = 0;
          for (size_t i = 0; i < p.size(); ++i) f += w[i] * p[i];
          return f;
        },
        test::to_double(logits));
    test::expect_grad_close(dlogits, num, 1e-6, 1e-5, pre ? "pre_softmax" : "default");
  }
}

TEST(MoeRouter, AuxLossBackwardFiniteDifference) {
  const int64_t n = 12, E = 6, k = 2;
  const double scale = 0.37;
  const auto logits = randn(n * E, "moe.aux.logits", 1.5f);
  const auto r = route(logits, n, E, k, false);
  for (int64_t seqs : {1, 3}) {
    std::vector<double> counts(seqs * E);
    moe_expert_counts(counts.data(), r.expert.data(), n, k, E, seqs);
    std::vector<float> once(n * E, 0.f), twice(n * E, 0.f);
    moe_aux_loss_backward(once.data(), r.scores.data(), counts.data(), n, E, seqs, scale);
    const auto num = test::numeric_grad(
        [&](const std::vector<double>& z) {
          double f = 0;
          for (int64_t t = 0; t < n; ++t) {
            const auto s = softmax_ref(z.data() + t * E, E);
            for (int64_t e = 0; e < E; ++e) f += s[e] * counts[(t % seqs) * E + e];
          }
          return scale * f;
        },
        test::to_double(logits));
    test::expect_grad_close(once, num, 1e-6, 1e-5, "aux seqs=" + std::to_string(seqs));
    // Accumulates: two calls give exactly twice one call.
    moe_aux_loss_backward(twice.data(), r.scores.data(), counts.data(), n, E, seqs, scale);
    moe_aux_loss_backward(twice.data(), r.scores.data(), counts.data(), n, E, seqs, scale);
    for (int64_t i = 0; i < n * E; ++i) ASSERT_EQ(twice[i], 2 * once[i]) << i;
  }
}

TEST(MoeRouter, ZLossValueAndBackward) {
  const int64_t n = 10, E = 5;
  const double scale = 0.3;
  const auto logits = randn(n * E, "moe.z.logits", 2.f, 0.5f);
  const auto zd = test::to_double(logits);
  const auto z_loss_ref = [&](const std::vector<double>& z) {
    double f = 0;
    for (int64_t t = 0; t < n; ++t) f += std::pow(lse_ref(z.data() + t * E, E), 2);
    return scale * f;
  };
  const double ref = z_loss_ref(zd);
  EXPECT_NEAR(moe_z_loss(logits.data(), n, E, scale), ref, 1e-12 * std::fabs(ref));
  std::vector<float> once(n * E, 0.f), twice(n * E, 0.f);
  moe_z_loss_backward(once.data(), logits.data(), n, E, scale);
  test::expect_grad_close(once, test::numeric_grad(z_loss_ref, zd), 1e-6, 1e-5, "z-loss");
  moe_z_loss_backward(twice.data(), logits.data(), n, E, scale);
  moe_z_loss_backward(twice.data(), logits.data(), n, E, scale);
  for (int64_t i = 0; i < n * E; ++i) ASSERT_EQ(twice[i], 2 * once[i]) << i;
}

// Megatron's two load-balancing losses, from their definitions, in double, on
// (S, b) tokens: switch_load_balancing_loss_func over the whole batch and
// sequence_load_balancing_loss_func per sequence, then the mean.
TEST(MoeRouter, AuxLossMatchesMegatronFormulas) {
  const int64_t S = 10, b = 3, n = S * b, E = 8, k = 2;
  const double coeff = 0.01;
  const auto logits = randn(n * E, "moe.formula.logits", 1.5f);
  const auto r = route(logits, n, E, k, false);
  // Direct counts: per sequence (token t = s·b + i is in sequence i) and in all.
  std::vector<double> per_seq(b * E, 0.0), total(E, 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      per_seq[(t % b) * E + r.expert[t * k + j]] += 1;
      total[r.expert[t * k + j]] += 1;
    }
  std::vector<double> c1(E), cb(b * E);
  moe_expert_counts(c1.data(), r.expert.data(), n, k, E, 1);
  moe_expert_counts(cb.data(), r.expert.data(), n, k, E, b);
  EXPECT_EQ(c1, total);
  EXPECT_EQ(cb, per_seq);

  // switch: E·coeff/(k·T²) · Σ_e (Σ_t scores[t, e]) · tokens_per_expert[e]
  const double T = double(n);
  double sw = 0;
  for (int64_t e = 0; e < E; ++e) {
    double col = 0;
    for (int64_t t = 0; t < n; ++t) col += r.scores[t * E + e];
    sw += col * total[e];
  }
  sw *= E * coeff / (k * T * T);
  const double got_sw = moe_aux_loss(r.scores.data(), c1.data(), n, E, 1, E * coeff / (k * T * T));
  EXPECT_NEAR(got_sw, sw, 1e-12 * std::fabs(sw));

  // seq: per sequence i, cost[e] = counts_i[e] / (S·k/E), mean_prob[e] =
  // Σ_s scores[s, i, e] / S; loss = coeff · mean_i Σ_e cost[e] · mean_prob[e]
  double seq = 0;
  for (int64_t i = 0; i < b; ++i) {
    double cost_i = 0;
    for (int64_t e = 0; e < E; ++e) {
      double mean_prob = 0;
      for (int64_t s = 0; s < S; ++s) mean_prob += r.scores[(s * b + i) * E + e];
      mean_prob /= double(S);
      cost_i += per_seq[i * E + e] / (double(S) * k / E) * mean_prob;
    }
    seq += cost_i / double(b);
  }
  seq *= coeff;
  const double got_seq =
      moe_aux_loss(r.scores.data(), cb.data(), n, E, b, E * coeff / (k * double(S * S) * b));
  EXPECT_NEAR(got_seq, seq, 1e-12 * std::fabs(seq));
  EXPECT_GT(sw, 0);
  EXPECT_GT(seq, 0);
}

// 4 tokens, E = 3, k = 2. Routed to expert 0: t0 (0.5), t1 (0.2), t2 (0.7),
// t3 (0.5); expert 1: t0 (0.3), t1 (0.6), t3 (0.4); expert 2: t2 (0.1).
TEST(MoeRouter, CapacityHandExample) {
  const std::vector<int32_t> expert = {0, 1, 1, 0, 0, 2, 0, 1};
  const std::vector<float> prob = {0.5f, 0.3f, 0.6f, 0.2f, 0.7f, 0.1f, 0.5f, 0.4f};
  const int64_t n = 4, E = 3, k = 2;
  std::vector<uint8_t> kept(n * k, 7);
  // "probs", capacity 2: expert 0 keeps t2 and t0 (t0 before t3 at 0.5),
  // expert 1 keeps t1 and t3; t1's and t3's choice of 0 and t0's of 1 drop.
  EXPECT_EQ(moe_apply_capacity(kept.data(), expert.data(), prob.data(), n, E, k, 2, false), 3);
  EXPECT_EQ(kept, (std::vector<uint8_t>{1, 0, 1, 0, 1, 1, 0, 1}));
  // "position", capacity 2: experts 0 and 1 keep t0 and t1.
  EXPECT_EQ(moe_apply_capacity(kept.data(), expert.data(), prob.data(), n, E, k, 2, true), 3);
  EXPECT_EQ(kept, (std::vector<uint8_t>{1, 1, 1, 1, 0, 1, 0, 0}));
  // capacity 1, "probs": expert 0 keeps t2, expert 1 keeps t1, expert 2 keeps t2.
  EXPECT_EQ(moe_apply_capacity(kept.data(), expert.data(), prob.data(), n, E, k, 1, false), 5);
  EXPECT_EQ(kept, (std::vector<uint8_t>{0, 0, 1, 0, 1, 1, 0, 0}));
  const std::vector<uint8_t> all(n * k, 1), none(n * k, 0);
  for (bool pos : {false, true}) {
    for (int64_t cap : {int64_t(4), int64_t(100), int64_t(-1)}) {
      EXPECT_EQ(moe_apply_capacity(kept.data(), expert.data(), prob.data(), n, E, k, cap, pos), 0);
      EXPECT_EQ(kept, all) << "capacity " << cap;
    }
    EXPECT_EQ(moe_apply_capacity(kept.data(), expert.data(), prob.data(), n, E, k, 0, pos), 8);
    EXPECT_EQ(kept, none);
  }
}

TEST(MoeRouter, ExpertCapacityIsMegatrons) {
  EXPECT_EQ(moe_expert_capacity(10, 4, 2, 1.0), 5);  // ceil(20/4)
  EXPECT_EQ(moe_expert_capacity(10, 4, 2, 1.1), 6);  // ceil(5.5)
  EXPECT_EQ(moe_expert_capacity(10, 8, 1, 1.0), 2);  // ceil(1.25)
  EXPECT_EQ(moe_expert_capacity(4096, 64, 2, 2.0), 256);
  EXPECT_THROW(moe_expert_capacity(10, 4, 2, 0.0), Error);
}

TEST(MoeRouter, ChecksArguments) {
  std::vector<float> z(8, 0.f), p(8), s(8), g(8);
  std::vector<int32_t> ex(8, 0);
  std::vector<double> c(8);
  std::vector<uint8_t> kept(8);
  EXPECT_THROW(moe_topk_forward(ex.data(), p.data(), s.data(), z.data(), 2, 4, 5, false), Error);
  EXPECT_THROW(moe_topk_forward(ex.data(), p.data(), s.data(), z.data(), 2, 4, 0, false), Error);
  EXPECT_THROW(moe_topk_forward(ex.data(), p.data(), s.data(), z.data(), 2, 0, 1, false), Error);
  EXPECT_THROW(moe_expert_counts(c.data(), ex.data(), 4, 1, 2, 3), Error);  // 4 % 3 != 0
  EXPECT_THROW(moe_aux_loss(s.data(), c.data(), 4, 2, 3, 1.0), Error);
  ex[3] = 2;  // expert id outside [0, E = 2)
  EXPECT_THROW(moe_expert_counts(c.data(), ex.data(), 4, 1, 2, 1), Error);
  EXPECT_THROW(moe_apply_capacity(kept.data(), ex.data(), p.data(), 4, 2, 1, 1, true), Error);
  EXPECT_THROW(moe_topk_backward(g.data(), p.data(), ex.data(), p.data(), s.data(), 4, 2, 1, false),
               Error);
}

TEST(MoeRouter, SameBitsOnOneAndTwoThreads) {
  const int64_t n = 300, E = 16, k = 4, seqs = 3;
  const auto logits = randn(n * E, "moe.threads.logits", 2.f);
  const auto w = randn(n * k, "moe.threads.w");
  const int64_t cap = moe_expert_capacity(n, E, k, 1.0);
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<double> out;  // every output, widened to double
    const auto put = [&](const auto& v) { out.insert(out.end(), v.begin(), v.end()); };
    for (bool pre : {false, true}) {
      const auto r = route(logits, n, E, k, pre);
      put(r.expert), put(r.prob), put(r.scores);
      std::vector<uint8_t> kept(n * k);
      for (bool pos : {false, true}) {
        out.push_back(double(
            moe_apply_capacity(kept.data(), r.expert.data(), r.prob.data(), n, E, k, cap, pos)));
        put(kept);
      }
      std::vector<float> g(n * E);
      moe_topk_backward(g.data(), w.data(), r.expert.data(), r.prob.data(), r.scores.data(), n, E,
                        k, pre);
      std::vector<double> counts(seqs * E);
      moe_expert_counts(counts.data(), r.expert.data(), n, k, E, seqs);
      out.push_back(moe_aux_loss(r.scores.data(), counts.data(), n, E, seqs, 0.01));
      moe_aux_loss_backward(g.data(), r.scores.data(), counts.data(), n, E, seqs, 0.01);
      out.push_back(moe_z_loss(logits.data(), n, E, 0.001));
      moe_z_loss_backward(g.data(), logits.data(), n, E, 0.001);
      put(g);
    }
    omp_set_num_threads(saved);
    return out;
  };
  const auto one = run(1), two = run(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(double)), 0);
}

}  // namespace moe_router_test
}  // namespace mt
