// The distributed optimizer (ZeRO-1): the padded bucket layout and its DP
// pieces, the in-place reduce-scatter / all-gather it communicates with, and
// a sharded AdamW step (reduce-scatter, grad norm, clipping, step on the
// pieces, all-gather) equal to the plain one (all-reduce, whole buffer).
// Valid for any world size (the DP group is the world); CTest also runs it
// under mpirun -n 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "optim_test_util.h"
#include "optim/grad_buckets.h"
#include "optim/optimizer.h"
#include "kernels/precision.h"
#include "optim/param_gather.h"

namespace mt {
namespace distributed_optimizer_test {

const char* kWordEmbedding = "embedding.word_embeddings.weight";


void check_sharded_layout(const ParamRegistry& reg, int64_t size, int dp) {
  SCOPED_TRACE("bucket size " + std::to_string(size) + ", dp " + std::to_string(dp));
  const std::vector<GradBucket> bs = plan_grad_buckets(reg, size, dp);
  ASSERT_FALSE(bs.empty());
  EXPECT_EQ(bs.front().end, reg.total_floats());
  EXPECT_EQ(bs.back().begin, 0);
  for (size_t b = 0; b < bs.size(); ++b) {
    const GradBucket& bk = bs[b];
    if (b + 1 < bs.size()) {
      EXPECT_EQ(bk.begin, bs[b + 1].end) << "bucket " << b;
    }
    // The word embedding is alone in its bucket.
    for (size_t i : bk.params) {
      if (reg.params()[i].name == kWordEmbedding) {
        EXPECT_EQ(bk.params.size(), 1u);
      }
    }
    // Padded to a multiple of kShardAlign·dp, by less than that.
    EXPECT_EQ(bk.padded % (kShardAlign * dp), 0) << "bucket " << b;
    EXPECT_GE(bk.padded, bk.numel());
    EXPECT_LT(bk.padded - bk.numel(), kShardAlign * dp);
    // Rank r owns the r-th padded/dp piece, cut at the bucket's end.
    ASSERT_EQ(bk.shards.counts.size(), size_t(dp));
    const int64_t piece = bk.padded / dp;
    EXPECT_EQ(bk.shards.total(), bk.numel());
    for (int r = 0; r < dp; ++r) {
      const FlatRange s = bk.shard(r);
      EXPECT_EQ(s.begin, std::min(bk.begin + r * piece, bk.end)) << "rank " << r;
      EXPECT_EQ(s.end, std::min(bk.begin + (r + 1) * piece, bk.end)) << "rank " << r;
      EXPECT_EQ(s.begin % kShardAlign, 0) << "piece not 64-byte aligned";
    }
  }
  // The pieces of all ranks tile the buffer.
  std::vector<FlatRange> all;
  for (int r = 0; r < dp; ++r) {
    const std::vector<FlatRange> mine = owned_ranges(bs, r);
    for (size_t k = 1; k < mine.size(); ++k) EXPECT_LE(mine[k - 1].end, mine[k].begin);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end(),
            [](const FlatRange& a, const FlatRange& b) { return a.begin < b.begin; });
  int64_t at = 0;
  for (const FlatRange& r : all) {
    EXPECT_EQ(r.begin, at);
    EXPECT_GT(r.size(), 0);
    at = r.end;
  }
  EXPECT_EQ(at, reg.total_floats());
}

TEST(DistributedLayout, PaddedBucketsTileTheBufferAndSplitOverDp) {
  const ParamRegistry reg = small_registry();
  for (int dp : {1, 2, 3, 4, 8})
    for (int64_t size : {int64_t(1), int64_t(100), int64_t(700), int64_t(5000), reg.total_floats()})
      check_sharded_layout(reg, size, dp);
  // Without dp_shards the layout is the all-reduce one (no padding, no pieces,
  // the embedding shares its bucket when it fits).
  const std::vector<GradBucket> plain = plan_grad_buckets(reg, reg.total_floats());
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].padded, 0);
  EXPECT_TRUE(plain[0].shards.counts.empty());
  const std::vector<GradBucket> two = plan_grad_buckets(reg, reg.total_floats(), 2);
  ASSERT_EQ(two.size(), 2u);  // everything else, and the embedding alone
  EXPECT_EQ(reg.params()[two[1].params[0]].name, kWordEmbedding);
}

TEST(DistributedCollectives, InPlaceReduceScatterAndAllGather) {
  const Communicator w = Communicator::world();
  const int n = w.size(), me = w.rank();
  std::vector<int64_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back(r + 1 == n && n > 1 ? 0 : 3 * r + 5);  // last empty
  const ChunkSplit split = chunk_split(counts);
  auto value = [](int rank, int i) { return float(rank + 1) * 0.5f + float(i); };
  for (bool blocking : {true, false}) {
    SCOPED_TRACE(blocking ? "blocking" : "non-blocking");
    std::vector<float> x(size_t(split.total()));
    for (int i = 0; i < int(x.size()); ++i) x[size_t(i)] = value(me, i);
    if (blocking) {
      w.reduce_scatter_sum_in_place(x.data(), split);
    } else {
      CommHandle h = w.start_reduce_scatter_sum_in_place(x.data(), split);
      h.wait();
    }
    for (int i = split.displs[size_t(me)]; i < split.displs[size_t(me)] + split.counts[size_t(me)];
         ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += value(r, i);
      ASSERT_EQ(x[size_t(i)], want) << "element " << i;
    }
    // All-gather: each rank contributes its chunk; the rest is garbage before.
    std::vector<float> y(x.size(), -1e9f);
    for (int i = split.displs[size_t(me)]; i < split.displs[size_t(me)] + split.counts[size_t(me)];
         ++i)
      y[size_t(i)] = float(me * 1000 + i);
    if (blocking) {
      w.all_gather_in_place(y.data(), split);
    } else {
      CommHandle h = w.start_all_gather_in_place(y.data(), split);
      h.wait();
    }
    for (int r = 0; r < n; ++r)
      for (int i = split.displs[size_t(r)]; i < split.displs[size_t(r)] + split.counts[size_t(r)];
           ++i)
        ASSERT_EQ(y[size_t(i)], float(r * 1000 + i)) << "element " << i << " of rank " << r;
  }
  ChunkSplit bad = split;
  bad.counts.push_back(1);
  bad.displs.push_back(int(split.total()));
  EXPECT_THROW(w.reduce_scatter_sum_in_place(nullptr, bad), Error);
}

// Integer-valued gradients (exact sums in float whatever the reduction order).
void fill_grads(std::vector<float>& g, const ParamRegistry& reg, int rank, int iteration) {
  std::fill(g.begin(), g.end(), 0.f);
  for (size_t p = 0; p < reg.params().size(); ++p)
    for (int64_t i = 0; i < reg.params()[p].numel(); ++i)
      g[size_t(reg.params()[p].offset + i)] =
          float((rank + 1) * (int64_t(p) % 5 + 1) + (i % 11) - 3 * iteration - 2);
}

struct StepCase {
  int64_t bucket;
  bool overlap;
};

class DistributedStep : public ::testing::TestWithParam<StepCase> {};

// Three iterations of (reduce, grad norm, clip, step) with the plain and the
// sharded optimizer side by side on the same data: the same grad norms, the
// same parameters on every rank, the state split over the ranks.
TEST_P(DistributedStep, EqualsThePlainStep) {
  const StepCase sc = GetParam();
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  OptimizerConfig oc;
  oc.weight_decay = 0.1f;
  oc.clip_grad = 5.0f;  // active: the norms below are in the hundreds
  std::vector<float> p_plain(size_t(reg.total_floats())), g_plain(p_plain.size());
  reg.initialize(p_plain.data(), 7);
  std::vector<float> p_dist = p_plain, g_dist(p_plain.size());

  GradBuckets plain_buckets(reg, g_plain.data(), dp, sc.bucket, sc.overlap);
  AdamWOptimizer plain(reg, oc);
  GradBuckets dist_buckets(reg, g_dist.data(), dp, sc.bucket, sc.overlap, true);
  ASSERT_TRUE(dist_buckets.distributed());
  AdamWOptimizer dist(reg, oc, owned_ranges(dist_buckets.buckets(), dp.rank()), &dp);
  ParamGather gather(dist_buckets.buckets(), p_dist.data(), nullptr, dp);
  ASSERT_TRUE(dist.sharded());
  ASSERT_FALSE(plain.sharded());

  for (int it = 0; it < 3; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    fill_grads(g_plain, reg, dp.rank(), it);
    g_dist = g_plain;
    for (size_t p = reg.params().size(); p-- > 0;) {  // backward order
      plain_buckets.mark_ready(p);
      dist_buckets.mark_ready(p);
    }
    plain_buckets.finish();
    dist_buckets.finish();
    // This rank's pieces hold the same DP average as the all-reduce.
    for (const OptimSegment& s : dist.segments())
      for (int64_t k = s.begin; k < s.end; ++k)
        ASSERT_EQ(g_dist[size_t(k)], g_plain[size_t(k)]) << "grad " << k;
    const double n_plain = plain.grad_norm(g_plain.data(), nullptr);
    const double n_dist = dist.grad_norm(g_dist.data(), nullptr);
    EXPECT_NEAR(n_dist, n_plain, 1e-12 * n_plain);
    ASSERT_GT(n_plain, oc.clip_grad);
    plain.step(p_plain.data(), g_plain.data(), 1e-2, nullptr, plain.clip_coefficient(n_plain));
    dist.step(p_dist.data(), g_dist.data(), 1e-2, nullptr, dist.clip_coefficient(n_dist));
    if (it == 0) {
      gather.gather();
    } else {  // overlapped: started, then waited bucket by bucket in forward order
      gather.start();
      EXPECT_EQ(gather.in_flight(), dp.size() > 1);
      for (size_t b = dist_buckets.buckets().size(); b-- > 0;) gather.wait(b);
      EXPECT_FALSE(gather.in_flight());
    }
    int64_t bad = 0;
    for (size_t k = 0; k < p_plain.size(); ++k)
      if (std::abs(p_dist[k] - p_plain[k]) > 1e-6f * (1.f + std::abs(p_plain[k])) && bad++ < 5)
        ADD_FAILURE() << "param[" << k << "] = " << p_dist[k] << ", plain " << p_plain[k];
    EXPECT_EQ(bad, 0);
  }
  EXPECT_EQ(dist.steps(), 3);
  // Moments: 8 bytes per owned float; the owned pieces of all ranks tile the buffer.
  int64_t owned = 0;
  for (const FlatRange& r : owned_ranges(dist_buckets.buckets(), dp.rank())) owned += r.size();
  EXPECT_EQ(dist.state_bytes(), size_t(owned) * 8);
  EXPECT_EQ(plain.state_bytes(), size_t(reg.total_floats()) * 8);
  int64_t sum = owned;
  dp.all_reduce_sum(&sum, 1);
  EXPECT_EQ(sum, reg.total_floats());
  // The moments of the owned segments equal the plain optimizer's.
  for (const OptimSegment& s : dist.segments())
    for (int64_t k = 0; k < s.size(); ++k) {
      ASSERT_NEAR(dist.exp_avg()[s.state + k], plain.exp_avg()[s.begin + k],
                  1e-6f * (1.f + std::abs(plain.exp_avg()[s.begin + k])));
      ASSERT_NEAR(dist.exp_avg_sq()[s.state + k], plain.exp_avg_sq()[s.begin + k],
                  1e-6f * plain.exp_avg_sq()[s.begin + k]);
    }
}

// bf16 runs: the model holds bf16 weights only; the sharded optimizer keeps
// the fp32 main weights of its pieces (12 bytes per owned float with m and v),
// writes their bf16 rounding into the model's buffer, and the all-gather moves
// bf16. Three steps equal the plain fp32 optimizer's: main weights to 1e-6,
// every rank's bf16 weights = the bf16 rounding of the plain ones.
TEST(DistributedStepBf16, MainWeightsShardedBf16Gathered) {
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  OptimizerConfig oc;
  oc.weight_decay = 0.1f;
  std::vector<float> p_plain(size_t(reg.total_floats())), g_plain(p_plain.size());
  reg.initialize(p_plain.data(), 7);
  std::vector<float> g_dist(p_plain.size());
  std::vector<uint16_t> w16(p_plain.size(), 0xFFFF);  // NaN until written

  GradBuckets plain_buckets(reg, g_plain.data(), dp, 300, false);
  AdamWOptimizer plain(reg, oc);
  GradBuckets dist_buckets(reg, g_dist.data(), dp, 300, false, true);
  AdamWOptimizer dist(reg, oc, owned_ranges(dist_buckets.buckets(), dp.rank()), &dp, true);
  ASSERT_TRUE(dist.has_main_params());
  ASSERT_FALSE(plain.has_main_params());
  ParamGather gather(dist_buckets.buckets(), nullptr, w16.data(), dp);
  for (size_t p = 0; p < reg.params().size(); ++p) {
    dist.set_main_params(p, p_plain.data() + reg.params()[p].offset);
    f32_to_bf16(w16.data() + reg.params()[p].offset, p_plain.data() + reg.params()[p].offset,
                reg.params()[p].numel());
  }
  EXPECT_THROW(dist.step(p_plain.data(), g_dist.data(), 1e-2), Error);  // fp32 weights: no
  for (int it = 0; it < 3; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    fill_grads(g_plain, reg, dp.rank(), it);
    g_dist = g_plain;
    for (size_t p = reg.params().size(); p-- > 0;) {
      plain_buckets.mark_ready(p);
      dist_buckets.mark_ready(p);
    }
    plain_buckets.finish();
    dist_buckets.finish();
    plain.step(p_plain.data(), g_plain.data(), 1e-2);
    dist.step(nullptr, g_dist.data(), 1e-2, w16.data());
    gather.gather();
    for (const OptimSegment& s : dist.segments())
      for (int64_t k = 0; k < s.size(); ++k)
        ASSERT_NEAR(dist.main_params()[s.state + k], p_plain[size_t(s.begin + k)],
                    1e-6f * (1.f + std::abs(p_plain[size_t(s.begin + k)])))
            << "main weight " << s.begin + k;
    for (const ParamSpec& p : reg.params())
      for (int64_t k = p.offset; k < p.offset + p.numel(); ++k)
        ASSERT_NEAR(f32_from_bf16(w16[size_t(k)]), p_plain[size_t(k)],
                    0x1p-8f * std::abs(p_plain[size_t(k)]) + 1e-6f)
            << "bf16 weight " << k;
  }
  int64_t owned = 0;
  for (const FlatRange& r : owned_ranges(dist_buckets.buckets(), dp.rank())) owned += r.size();
  EXPECT_EQ(dist.state_bytes(), size_t(owned) * 12);
}

INSTANTIATE_TEST_SUITE_P(Buckets, DistributedStep,
                         ::testing::Values(StepCase{300, false}, StepCase{300, true},
                                           StepCase{1'000'000, false}),
                         [](const ::testing::TestParamInfo<StepCase>& i) {
                           return "Bucket" + std::to_string(i.param.bucket) +
                                  (i.param.overlap ? "Overlap" : "");
                         });

TEST(DistributedOptimizer, SegmentsCutParametersAndLoadTheirState) {
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  OptimizerConfig oc;
  // Two hand-made ranges cutting through parameters, gaps left out.
  const ParamSpec& a = reg.params()[2];
  const ParamSpec& b = reg.params()[5];
  const std::vector<FlatRange> ranges = {{a.offset + 3, b.offset + 5},
                                         {b.offset + 9, b.offset + 9}};
  AdamWOptimizer opt(reg, oc, ranges, &dp);
  EXPECT_EQ(opt.state_floats(), b.offset + 5 - a.offset - 3);
  ASSERT_EQ(opt.segments().size(), 4u);  // the end of 2, all of 3 and 4, the start of 5
  EXPECT_EQ(opt.segments().front().param, 2u);
  EXPECT_EQ(opt.segments().front().begin, a.offset + 3);
  EXPECT_EQ(opt.segments().front().end, a.offset + a.numel());
  EXPECT_EQ(opt.segments().back().param, 5u);
  EXPECT_EQ(opt.segments().back().size(), 5);
  for (const OptimSegment& s : opt.segments()) EXPECT_EQ(s.state, s.begin - (a.offset + 3));
  std::vector<float> m(size_t(a.numel())), v(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    m[i] = float(i);
    v[i] = float(2 * i);
  }
  opt.set_param_state(2, m.data(), v.data());
  for (int64_t k = 3; k < a.numel(); ++k) {
    EXPECT_EQ(opt.exp_avg()[k - 3], float(k));
    EXPECT_EQ(opt.exp_avg_sq()[k - 3], float(2 * k));
  }
  EXPECT_THROW(AdamWOptimizer(reg, oc, {{10, 20}, {15, 30}}, &dp), Error);  // overlapping
  EXPECT_THROW(AdamWOptimizer(reg, oc, {{0, 16}}, nullptr), Error);          // no DP group
}

}  // namespace distributed_optimizer_test
}  // namespace mt
