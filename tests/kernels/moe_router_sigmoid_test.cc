// DeepSeek-V3's routing in the router kernels (moe_router.h): sigmoid scores
// normalised over the chosen, the top-k scaling factor, group-limited choice
// and the expert bias (choice only), each against a direct computation in
// double; finite-difference gradients of the sigmoid weights and of the
// sigmoid load-balancing loss; the expert bias's update step.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"
#include "kernels/moe_router.h"

namespace mt {
namespace moe_router_sigmoid_test {

using test::randn;

double sigmoid_ref(double z) { return 1 / (1 + std::exp(-z)); }

struct Routed {
  std::vector<int32_t> expert;
  std::vector<float> prob, scores;
};

Routed route(const std::vector<float>& logits, int64_t n, int64_t E, int64_t k,
             const MoeRouting& r) {
  Routed o{std::vector<int32_t>(n * k), std::vector<float>(n * k), std::vector<float>(n * E)};
  moe_topk_forward(o.expert.data(), o.prob.data(), o.scores.data(), logits.data(), n, E, k, r);
  return o;
}

MoeRouting sigmoid_routing(double scaling = 1, int64_t groups = 0, int64_t group_topk = 0,
                           const float* bias = nullptr) {
  MoeRouting r;
  r.score = MoeScoreFunction::kSigmoid;
  r.scaling = scaling;
  r.num_groups = groups;
  r.group_topk = group_topk;
  r.bias = bias;
  return r;
}

// Megatron's group_limited_topk written out for one row, from its steps:
// group score = sum of the group's top k/g keys; the g best groups; the k
// best keys among their experts (ties: lower index, as the kernel documents).
std::vector<int32_t> group_limited_ref(const std::vector<double>& key, int64_t k, int64_t G,
                                       int64_t g) {
  const int64_t E = int64_t(key.size()), per = E / G;
  std::vector<std::pair<double, int64_t>> groups;
  for (int64_t q = 0; q < G; ++q) {
    std::vector<double> v(key.begin() + q * per, key.begin() + (q + 1) * per);
    std::sort(v.rbegin(), v.rend());
    groups.push_back({-std::accumulate(v.begin(), v.begin() + k / g, 0.0), q});
  }
  std::sort(groups.begin(), groups.end());
  std::vector<std::pair<double, int32_t>> allowed;
  for (int64_t j = 0; j < g; ++j)
    for (int64_t e = groups[j].second * per; e < (groups[j].second + 1) * per; ++e)
      allowed.push_back({-key[e], int32_t(e)});
  std::sort(allowed.begin(), allowed.end());
  std::vector<int32_t> out;
  for (int64_t j = 0; j < k; ++j) out.push_back(allowed[j].second);
  return out;
}

TEST(MoeRouterSigmoid, WeightsAreChosenScoresOverTheirSumTimesTheFactor) {
  const int64_t n = 5, E = 6, k = 3;
  const auto logits = randn(n * E, "moe.sig.logits", 2.f);
  const double factor = 2.5;
  const auto r = route(logits, n, E, k, sigmoid_routing(factor));
  for (int64_t t = 0; t < n; ++t) {
    std::vector<std::pair<double, int32_t>> order;
    for (int64_t e = 0; e < E; ++e) {
      EXPECT_NEAR(r.scores[t * E + e], sigmoid_ref(logits[t * E + e]), 1e-7);
      order.push_back({-sigmoid_ref(logits[t * E + e]), int32_t(e)});
    }
    std::sort(order.begin(), order.end());
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += -order[j].first;
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(r.expert[t * k + j], order[j].second) << t;
      EXPECT_NEAR(r.prob[t * k + j], factor * -order[j].first / sum, 1e-6) << t;
    }
  }
  // k = 1: the score itself, not renormalised (which would give 1).
  const auto one = route({0.5f, -1.f, 2.f}, 1, 3, 1, sigmoid_routing());
  EXPECT_EQ(one.expert[0], 2);
  EXPECT_NEAR(one.prob[0], sigmoid_ref(2.0), 1e-7);
  // The factor applies to softmax routing too.
  MoeRouting soft;
  soft.scaling = 3;
  const auto s = route({1.f, 3.f, 2.f, 0.f}, 1, 4, 2, soft);
  EXPECT_NEAR(s.prob[0] + s.prob[1], 3.0, 1e-6);
}

TEST(MoeRouterSigmoid, GroupLimitedChoiceMatchesMegatronsSteps) {
  const int64_t n = 40, E = 16, k = 4;
  const auto logits = randn(n * E, "moe.group.logits", 1.5f);
  for (auto [G, g] : {std::pair<int64_t, int64_t>{4, 2}, {8, 4}, {4, 1}, {2, 2}}) {
    for (bool sigmoid : {true, false}) {
      MoeRouting rt = sigmoid ? sigmoid_routing(1, G, g) : MoeRouting{};
      rt.num_groups = G;
      rt.group_topk = g;
      const auto r = route(logits, n, E, k, rt);
      for (int64_t t = 0; t < n; ++t) {
        // sigmoid: the scores; softmax: the logits
        std::vector<double> key(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e)
          key[e] = sigmoid ? double(r.scores[t * E + e]) : double(logits[t * E + e]);
        const auto want = group_limited_ref(key, k, G, g);
        for (int64_t j = 0; j < k; ++j)
          ASSERT_EQ(r.expert[t * k + j], want[j]) << "G=" << G << " g=" << g << " t=" << t;
      }
    }
  }
  // A hand example: groups {0,1} {2,3} {4,5}; top-1 per group (k/g = 2/2):
  // group 1 (0.9) and group 2 (0.8) win over group 0 (0.7 + nothing), even
  // though expert 1's 0.7 beats expert 4's 0.1.
  const std::vector<float> z = {0.6f, 0.7f, 0.9f, 0.2f, 0.1f, 0.8f};
  MoeRouting soft;
  soft.num_groups = 3;
  soft.group_topk = 2;
  EXPECT_EQ(route(z, 1, 6, 2, soft).expert, (std::vector<int32_t>{2, 5}));
  soft.group_topk = 0;  // no limit: the plain top-2
  EXPECT_EQ(route(z, 1, 6, 2, soft).expert, (std::vector<int32_t>{2, 5}));
  const std::vector<float> z2 = {0.6f, 0.95f, 0.9f, 0.2f, 0.1f, 0.8f};
  soft.group_topk = 1;  // one group, the best by its top-2 sum: {0, 1}
  EXPECT_EQ(route(z2, 1, 6, 2, soft).expert, (std::vector<int32_t>{1, 0}));
}

TEST(MoeRouterSigmoid, BiasChangesTheChoiceButNotTheWeights) {
  const int64_t n = 30, E = 8, k = 2;
  const auto logits = randn(n * E, "moe.bias.logits", 1.f);
  const auto bias = randn(E, "moe.bias.bias", 0.5f);
  for (int64_t G : {0, 4}) {
    const auto r = route(logits, n, E, k, sigmoid_routing(1.5, G, G ? 2 : 0, bias.data()));
    int64_t changed = 0;
    const auto plain = route(logits, n, E, k, sigmoid_routing(1.5, G, G ? 2 : 0));
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> key(static_cast<size_t>(E)), u(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) {
        u[e] = r.scores[t * E + e];
        key[e] = double(float(r.scores[t * E + e] + bias[e]));
      }
      const auto want = G ? group_limited_ref(key, k, G, 2) : group_limited_ref(key, k, 1, 1);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += u[want[j]];
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_EQ(r.expert[t * k + j], want[j]) << t;
        // The weights are the unbiased scores of the chosen, normalised.
        EXPECT_NEAR(r.prob[t * k + j], 1.5 * u[want[j]] / sum, 1e-6) << t;
      }
      changed += r.expert[t * k] != plain.expert[t * k] ||
                 r.expert[t * k + 1] != plain.expert[t * k + 1];
    }
    EXPECT_GT(changed, 0) << "the bias changed no choice: the test checks nothing";
  }
  // A bias with softmax scores is refused (Megatron ignores it there).
  MoeRouting soft;
  soft.bias = bias.data();
  EXPECT_THROW(route(logits, n, E, k, soft), Error);
}

TEST(MoeRouterSigmoid, TopkBackwardFiniteDifference) {
  const int64_t n = 9, E = 8, k = 3;
  const auto logits = randn(n * E, "moe.sig.bwd.logits", 1.5f);
  const auto bias = randn(E, "moe.sig.bwd.bias", 0.3f);
  const auto w = randn(n * k, "moe.sig.bwd.w");  // dprob: the objective is Σ w·prob
  for (int64_t kk : {int64_t(1), k}) {
    const MoeRouting rt = sigmoid_routing(2.5, 4, kk == 1 ? 1 : 2, bias.data());
    const auto r = route(logits, n, E, kk, rt);
    std::vector<float> dlogits(n * E, 7.f);  // overwritten, not accumulated
    moe_topk_backward(dlogits.data(), w.data(), r.expert.data(), r.prob.data(), r.scores.data(),
                      n, E, kk, rt);
    const auto num = test::numeric_grad(
        [&](const std::vector<double>& z) {  // the forward's choice held fixed
          double f = 0;
          for (int64_t t = 0; t < n; ++t) {
            double sum = kk > 1 ? 1e-20 : 1;
            if (kk > 1)
              for (int64_t j = 0; j < kk; ++j) sum += sigmoid_ref(z[t * E + r.expert[t * kk + j]]);
            for (int64_t j = 0; j < kk; ++j)
              f += w[t * kk + j] * 2.5 * sigmoid_ref(z[t * E + r.expert[t * kk + j]]) / sum;
          }
          return f;
        },
        test::to_double(logits));
    test::expect_grad_close(dlogits, num, 1e-6, 1e-5, "sigmoid k=" + std::to_string(kk));
  }
}

TEST(MoeRouterSigmoid, ScaledSoftmaxBackwardFiniteDifference) {
  const int64_t n = 6, E = 5, k = 2;
  const auto logits = randn(n * E, "moe.scaled.logits", 1.5f);
  const auto w = randn(n * k, "moe.scaled.w");
  for (bool pre : {false, true}) {
    MoeRouting rt;
    rt.pre_softmax = pre;
    rt.scaling = 1.7;
    const auto r = route(logits, n, E, k, rt);
    std::vector<float> dlogits(n * E);
    moe_topk_backward(dlogits.data(), w.data(), r.expert.data(), r.prob.data(), r.scores.data(),
                      n, E, k, rt);
    const auto num = test::numeric_grad(
        [&](const std::vector<double>& z) {
          double f = 0;
          for (int64_t t = 0; t < n; ++t) {
            const double* row = z.data() + t * E;
            double all = 0, chosen = 0;
            for (int64_t e = 0; e < E; ++e) all += std::exp(row[e]);
            for (int64_t j = 0; j < k; ++j) chosen += std::exp(row[r.expert[t * k + j]]);
            for (int64_t j = 0; j < k; ++j)
              f += w[t * k + j] * 1.7 * std::exp(row[r.expert[t * k + j]]) / (pre ? all : chosen);
          }
          return f;
        },
        test::to_double(logits));
    test::expect_grad_close(dlogits, num, 1e-6, 1e-5, pre ? "scaled pre_softmax" : "scaled");
  }
}

TEST(MoeRouterSigmoid, AuxLossOnNormalisedSigmoidScores) {
  const int64_t n = 12, E = 6, k = 2;
  const double scale = 0.41;
  const auto logits = randn(n * E, "moe.sig.aux.logits", 1.5f);
  const auto r = route(logits, n, E, k, sigmoid_routing());
  for (int64_t seqs : {1, 3}) {
    std::vector<double> counts(seqs * E);
    moe_expert_counts(counts.data(), r.expert.data(), n, k, E, seqs);
    const auto f = [&](const std::vector<double>& z) {
      double sum = 0;
      for (int64_t t = 0; t < n; ++t) {
        double total = 1e-20;
        for (int64_t e = 0; e < E; ++e) total += sigmoid_ref(z[t * E + e]);
        for (int64_t e = 0; e < E; ++e)
          sum += sigmoid_ref(z[t * E + e]) / total * counts[(t % seqs) * E + e];
      }
      return scale * sum;
    };
    EXPECT_NEAR(moe_aux_loss(r.scores.data(), counts.data(), n, E, seqs, scale,
                             MoeScoreFunction::kSigmoid),
                f(test::to_double(logits)), 1e-6);
    std::vector<float> g(n * E, 0.f);
    moe_aux_loss_backward(g.data(), r.scores.data(), counts.data(), n, E, seqs, scale,
                          MoeScoreFunction::kSigmoid);
    test::expect_grad_close(g, test::numeric_grad(f, test::to_double(logits)), 1e-6, 1e-5,
                            "sigmoid aux seqs=" + std::to_string(seqs));
  }
}

TEST(MoeRouterSigmoid, PlainTopkIgnoresGroupsAndBias) {
  const int64_t n = 20, E = 8, k = 2;
  const auto logits = randn(n * E, "moe.plain.logits", 1.f);
  std::vector<int32_t> plain(n * k);
  moe_topk_plain(plain.data(), logits.data(), n, E, k);
  EXPECT_EQ(plain, route(logits, n, E, k, sigmoid_routing()).expert);
  EXPECT_EQ(plain, route(logits, n, E, k, MoeRouting{}).expert);
}

TEST(MoeRouterSigmoid, ExpertBiasUpdateIsSignOfMeanMinusLoad) {
  std::vector<float> bias = {0.f, 0.5f, -0.25f, 1.f};
  const std::vector<double> tokens = {10, 2, 6, 6};  // mean 6
  moe_expert_bias_update(bias.data(), tokens.data(), 4, 0.125f);
  EXPECT_EQ(bias, (std::vector<float>{-0.125f, 0.625f, -0.25f, 1.f}));
}

TEST(MoeRouterSigmoid, SameBitsOnOneAndTwoThreads) {
  const int64_t n = 300, E = 16, k = 4, seqs = 3;
  const auto logits = randn(n * E, "moe.sig.threads.logits", 2.f);
  const auto bias = randn(E, "moe.sig.threads.bias", 0.2f);
  const auto w = randn(n * k, "moe.sig.threads.w");
  const MoeRouting rt = sigmoid_routing(2.5, 8, 2, bias.data());
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const auto r = route(logits, n, E, k, rt);
    std::vector<double> out(r.prob.begin(), r.prob.end());  // every output, widened
    out.insert(out.end(), r.expert.begin(), r.expert.end());
    std::vector<float> g(n * E);
    moe_topk_backward(g.data(), w.data(), r.expert.data(), r.prob.data(), r.scores.data(), n, E,
                      k, rt);
    std::vector<double> counts(seqs * E);
    moe_expert_counts(counts.data(), r.expert.data(), n, k, E, seqs);
    out.push_back(moe_aux_loss(r.scores.data(), counts.data(), n, E, seqs, 0.01,
                               MoeScoreFunction::kSigmoid));
    moe_aux_loss_backward(g.data(), r.scores.data(), counts.data(), n, E, seqs, 0.01,
                          MoeScoreFunction::kSigmoid);
    out.insert(out.end(), g.begin(), g.end());
    omp_set_num_threads(saved);
    return out;
  };
  const auto one = run(1), two = run(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(double)), 0);
}

TEST(MoeRouterSigmoid, ChecksGroups) {
  const auto z = randn(12, "moe.check.z");
  EXPECT_THROW(route(z, 1, 12, 2, sigmoid_routing(1, 5, 2)), Error);   // 5 does not divide 12
  EXPECT_THROW(route(z, 1, 12, 2, sigmoid_routing(1, 4, 5)), Error);   // 5 > 4 groups
  EXPECT_THROW(route(z, 1, 12, 2, sigmoid_routing(1, 4, 3)), Error);   // 3 groups > k = 2
  EXPECT_THROW(route(z, 1, 12, 4, sigmoid_routing(1, 12, 2)), Error);  // 2 groups of 1 < k = 4
  EXPECT_NO_THROW(route(z, 1, 12, 2, sigmoid_routing(1, 5, 0)));       // groups alone: no limit
}

}  // namespace moe_router_sigmoid_test
}  // namespace mt
