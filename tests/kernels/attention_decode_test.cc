// KV-cache attention of one token (kernels/attention_decode.h) against a
// double-precision softmax(q k^T / sqrt(d)) v over cache rows [0, pos], with
// grouped-query heads reading their group's keys and values.
#include "kernels/attention_decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace mt {
namespace {

TEST(AttentionDecode, MatchesSoftmaxOverTheCacheRowsUpToPos) {
  const int64_t a = 6, g = 2, d = 8, capacity = 12, kvl = g * d;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(size_t(a * d)), k(size_t(capacity * kvl)), v(k.size());
  for (float& x : q) x = nd(gen);
  for (float& x : k) x = nd(gen);
  for (float& x : v) x = nd(gen);
  for (int64_t pos : {int64_t(0), int64_t(5), capacity - 1}) {
    // Rows past pos hold garbage the query must not see.
    std::vector<float> kk = k, vv = v;
    for (int64_t t = pos + 1; t < capacity; ++t)
      for (int64_t e = 0; e < kvl; ++e) kk[size_t(t * kvl + e)] = vv[size_t(t * kvl + e)] = 1e30f;
    std::vector<float> ctx(static_cast<size_t>(a * d), -1.f);
    std::vector<float> scores(static_cast<size_t>(capacity));
    attention_decode_forward(ctx.data(), q.data(), kk.data(), vv.data(), a, g, d, pos,
                             scores.data());
    for (int64_t j = 0; j < a; ++j) {
      const int64_t grp = j / (a / g);
      std::vector<double> w(size_t(pos + 1));
      double mx = -1e300, sum = 0;
      for (int64_t t = 0; t <= pos; ++t) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e)
          dot += double(q[size_t(j * d + e)]) * k[size_t(t * kvl + grp * d + e)];
        w[size_t(t)] = dot / std::sqrt(double(d));
        mx = std::max(mx, w[size_t(t)]);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int64_t e = 0; e < d; ++e) {
        double o = 0;
        for (int64_t t = 0; t <= pos; ++t)
          o += w[size_t(t)] / sum * v[size_t(t * kvl + grp * d + e)];
        EXPECT_NEAR(ctx[size_t(j * d + e)], o, 1e-5)
            << "pos " << pos << " head " << j << " e " << e;
      }
    }
  }
}

}  // namespace
}  // namespace mt
