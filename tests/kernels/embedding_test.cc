#include "kernels/embedding.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"

namespace mt {
namespace embedding_test {

constexpr int64_t kV = 11, kH = 70;  // h spans two column blocks
// Repeated ids (3 three times) exercise accumulation in backward.
const std::vector<int32_t> kIds = {3, 0, 10, 3, 7, 3, 5, 1, 9};

TEST(Embedding, ForwardLooksUpAndAccumulates) {
  auto table = test::randn(kV * kH, "emb.table");
  const int64_t n = int64_t(kIds.size());
  std::vector<float> out(n * kH, -7.f);
  embedding_forward(out.data(), kIds.data(), table.data(), n, kH, 0, kV, false);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < kH; ++j) ASSERT_EQ(out[i * kH + j], table[kIds[i] * kH + j]);
  auto base = test::randn(n * kH, "emb.base");
  auto acc = base;
  embedding_forward(acc.data(), kIds.data(), table.data(), n, kH, 0, kV, true);
  for (int64_t k = 0; k < n * kH; ++k) ASSERT_EQ(acc[k], base[k] + out[k]);
}

TEST(Embedding, VocabShardsSumToTheFullLookup) {
  auto table = test::randn(kV * kH, "emb.table");
  const int64_t n = int64_t(kIds.size());
  std::vector<float> full(n * kH), sum(n * kH, 0.f), part(n * kH, 9.f);
  embedding_forward(full.data(), kIds.data(), table.data(), n, kH, 0, kV, false);
  // Shards [0, 4), [4, 8), [8, 11): rows outside a shard come out zero.
  const int64_t starts[] = {0, 4, 8}, rows[] = {4, 4, 3};
  for (int s = 0; s < 3; ++s) {
    embedding_forward(part.data(), kIds.data(), table.data() + starts[s] * kH, n, kH, starts[s],
                      rows[s], false);
    for (int64_t i = 0; i < n; ++i) {
      const bool mine = kIds[i] >= starts[s] && kIds[i] < starts[s] + rows[s];
      for (int64_t j = 0; j < kH; ++j) {
        if (!mine) {
          ASSERT_EQ(part[i * kH + j], 0.f);
        }
        sum[i * kH + j] += part[i * kH + j];
      }
    }
  }
  EXPECT_EQ(sum, full);
}

// L = sum(out * dout); its gradient wrt the table, by central differences of a
// double reference, against the kernel's scatter (starting from non-zero dtable).
TEST(Embedding, BackwardFiniteDifferenceAndShards) {
  const int64_t n = int64_t(kIds.size());
  auto table = test::randn(kV * kH, "emb.table");
  auto dout = test::randn(n * kH, "emb.dout");
  auto dt0 = test::randn(kV * kH, "emb.dt0");
  auto dtable = dt0;
  embedding_backward(dtable.data(), dout.data(), kIds.data(), n, kH, 0, kV);
  std::vector<float> grad(kV * kH);
  for (int64_t k = 0; k < kV * kH; ++k) grad[k] = dtable[k] - dt0[k];
  auto loss = [&](const std::vector<double>& t) {
    double l = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < kH; ++j) l += t[kIds[i] * kH + j] * dout[i * kH + j];
    return l;
  };
  auto num = test::numeric_grad(loss, test::to_double(table));
  test::expect_grad_close(grad, num, 1e-5, 1e-5, "dtable");
  for (int64_t j = 0; j < kH; ++j) EXPECT_EQ(grad[2 * kH + j], 0.f);  // id 2 unused

  // A shard [4, 8) accumulates exactly its rows of the full gradient.
  std::vector<float> shard(4 * kH, 0.f), full(kV * kH, 0.f);
  embedding_backward(full.data(), dout.data(), kIds.data(), n, kH, 0, kV);
  embedding_backward(shard.data(), dout.data(), kIds.data(), n, kH, 4, 4);
  EXPECT_EQ(shard, std::vector<float>(full.begin() + 4 * kH, full.begin() + 8 * kH));
}

TEST(Embedding, BackwardIsDeterministicAcrossThreadCounts) {
  const int64_t n = 4000, h = 256, v = 7;  // many repeats of few ids
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = int32_t((i * 5 + i / 3) % v);
  auto dout = test::randn(n * h, "embd.dout");
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> dt(v * h, 0.f);
    embedding_backward(dt.data(), dout.data(), ids.data(), n, h, 0, v);
    omp_set_num_threads(saved);
    return dt;
  };
  const auto one = run(1);
  EXPECT_EQ(one, run(2));
  EXPECT_EQ(one, run(3));
}

TEST(Embedding, RejectsNegativeIds) {
  std::vector<int32_t> ids = {1, -2};
  std::vector<float> table(kV * kH), out(2 * kH);
  EXPECT_THROW(embedding_forward(out.data(), ids.data(), table.data(), 2, kH, 0, kV, false), Error);
}

}  // namespace embedding_test
}  // namespace mt
