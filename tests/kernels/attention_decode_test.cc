// KV-cache attention of one token (kernels/attention_decode.h) against a
// double-precision softmax(q k^T / sqrt(d)) v over positions [first, last] of
// a sequence, with grouped-query heads reading their group's keys and values:
// a contiguous cache (one block), and a paged one whose blocks lie out of
// order in the pool, as a ring that has wrapped (a sliding window's).
#include "kernels/attention_decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace mt {
namespace attention_decode_test {

constexpr int64_t kA = 6, kG = 2, kD = 8, kKvl = kG * kD;

// The double reference over positions [first, last]; key(t) and value(t)
// give position t's row (kvl floats).
template <class Key, class Value>
void expect_matches(const std::vector<float>& ctx, const std::vector<float>& q, int64_t first,
                    int64_t last, Key key, Value value) {
  for (int64_t j = 0; j < kA; ++j) {
    const int64_t grp = j / (kA / kG);
    std::vector<double> w;
    double mx = -1e300, sum = 0;
    for (int64_t t = first; t <= last; ++t) {
      double dot = 0;
      for (int64_t e = 0; e < kD; ++e) dot += double(q[size_t(j * kD + e)]) * key(t)[grp * kD + e];
      w.push_back(dot / std::sqrt(double(kD)));
      mx = std::max(mx, w.back());
    }
    for (double& x : w) sum += (x = std::exp(x - mx));
    for (int64_t e = 0; e < kD; ++e) {
      double o = 0;
      for (int64_t t = first; t <= last; ++t)
        o += w[size_t(t - first)] / sum * value(t)[grp * kD + e];
      EXPECT_NEAR(ctx[size_t(j * kD + e)], o, 1e-5)
          << "positions " << first << ".." << last << " head " << j << " e " << e;
    }
  }
}

std::vector<float> normal(int64_t n, std::mt19937& gen) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(gen);
  return x;
}

TEST(AttentionDecode, OneBlockMatchesSoftmaxOverTheRowsUpToPos) {
  const int64_t capacity = 12;
  std::mt19937 gen(3);
  const std::vector<float> q = normal(kA * kD, gen), k = normal(capacity * kKvl, gen),
                           v = normal(capacity * kKvl, gen);
  const int32_t table[] = {0};
  for (int64_t pos : {int64_t(0), int64_t(5), capacity - 1}) {
    // Rows past pos hold garbage the query must not see.
    std::vector<float> kk = k, vv = v;
    for (int64_t t = pos + 1; t < capacity; ++t)
      for (int64_t e = 0; e < kKvl; ++e) kk[size_t(t * kKvl + e)] = vv[size_t(t * kKvl + e)] = 1e30f;
    std::vector<float> ctx(static_cast<size_t>(kA * kD), -1.f), scores(static_cast<size_t>(capacity));
    const PagedKv kv{kk.data(), vv.data(), capacity, table, capacity, kG, kD};
    attention_decode_forward(ctx.data(), scores.data(), q.data(), kA, kv, 0, pos);
    auto key = [&](int64_t t) { return &k[size_t(t * kKvl)]; };
    auto value = [&](int64_t t) { return &v[size_t(t * kKvl)]; };
    expect_matches(ctx, q, 0, pos, key, value);
  }
}

// Blocks of 4 rows; the sequence holds pool blocks {5, 1, 3} (a ring of 12
// slots). Positions 0..9 unwrapped, then positions 9..20 after the ring has
// wrapped (a window of 12 keys): each position's row found through the table.
TEST(AttentionDecode, PagedBlocksOutOfOrderAndAWrappedRing) {
  const int64_t bs = 4, blocks = 6, ring = 12;
  const int32_t table[] = {5, 1, 3};
  std::mt19937 gen(7);
  const std::vector<float> q = normal(kA * kD, gen);
  std::vector<float> k = normal(blocks * bs * kKvl, gen), v = normal(blocks * bs * kKvl, gen);
  auto row = [&](int64_t t) {
    const int64_t slot = t % ring;
    return (table[slot / bs] * bs + slot % bs) * kKvl;
  };
  auto key = [&](int64_t t) { return &k[size_t(row(t))]; };
  auto value = [&](int64_t t) { return &v[size_t(row(t))]; };
  const PagedKv kv{k.data(), v.data(), bs, table, ring, kG, kD};
  std::vector<float> ctx(static_cast<size_t>(kA * kD)), scores(static_cast<size_t>(ring));
  for (auto [first, last] : {std::pair<int64_t, int64_t>{0, 9}, {3, 6}, {9, 20}, {20, 20}}) {
    attention_decode_forward(ctx.data(), scores.data(), q.data(), kA, kv, first, last);
    expect_matches(ctx, q, first, last, key, value);
  }
}

}  // namespace attention_decode_test
}  // namespace mt
