// DP gradient buckets: the layout tiles the flat buffer in reverse registry
// order within the size limit; after finish() every element holds the average
// over ranks (exactly, for integer-valued data), with overlap on and off,
// whatever order buckets become ready in. Valid for any world size (the DP
// group is the world); CTest also runs it under mpirun -n 2.
#include "optim/grad_buckets.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "optim_test_util.h"

namespace mt {
namespace grad_buckets_test {

// End of parameter i's share of the buffer (its floats and padding).
int64_t param_end(const ParamRegistry& reg, size_t i) {
  return i + 1 < reg.params().size() ? reg.params()[i + 1].offset : reg.total_floats();
}

void check_layout(const ParamRegistry& reg, int64_t size) {
  SCOPED_TRACE("bucket size " + std::to_string(size));
  const std::vector<GradBucket> bs = plan_grad_buckets(reg, size);
  const size_t n = reg.params().size();
  ASSERT_FALSE(bs.empty());
  EXPECT_EQ(bs.front().end, reg.total_floats());
  EXPECT_EQ(bs.back().begin, 0);
  size_t expect_param = n;  // the concatenation of all buckets is n-1, ..., 0
  for (size_t b = 0; b < bs.size(); ++b) {
    const GradBucket& bk = bs[b];
    ASSERT_FALSE(bk.params.empty()) << "bucket " << b;
    if (b + 1 < bs.size()) {
      EXPECT_EQ(bk.begin, bs[b + 1].end) << "bucket " << b;
    }
    for (size_t i : bk.params) ASSERT_EQ(i, --expect_param) << "bucket " << b;
    EXPECT_EQ(bk.end, param_end(reg, bk.params.front())) << "bucket " << b;
    EXPECT_EQ(bk.begin, reg.params()[bk.params.back()].offset) << "bucket " << b;
    EXPECT_TRUE(bk.numel() <= size || bk.params.size() == 1)
        << "bucket " << b << " has " << bk.numel() << " floats in " << bk.params.size()
        << " parameters";
    // Closed only when full: at the size, or the next parameter would not fit.
    if (b + 1 < bs.size()) {
      const size_t next = bs[b + 1].params.front();
      EXPECT_TRUE(bk.numel() >= size || bk.end - reg.params()[next].offset > size)
          << "bucket " << b << " closed early at " << bk.numel() << " floats";
    }
  }
  EXPECT_EQ(expect_param, 0u) << "some parameters are in no bucket";
}

TEST(GradBuckets, LayoutTilesBufferInReverseOrder) {
  const ParamRegistry reg = small_registry();
  const size_t n = reg.params().size();
  ASSERT_EQ(n, 2 + 12 * 3 + 2u);
  for (int64_t size : {int64_t(1), int64_t(16), int64_t(100), int64_t(300), int64_t(1000),
                       int64_t(5000), reg.total_floats(), reg.total_floats() * 10})
    check_layout(reg, size);
  // Size 1: one bucket per parameter, the final norm's bias first.
  const std::vector<GradBucket> one = plan_grad_buckets(reg, 1);
  ASSERT_EQ(one.size(), n);
  EXPECT_EQ(one.front().params.front(), n - 1);
  EXPECT_EQ(reg.params()[n - 1].name, "decoder.final_layernorm.bias");
  // Everything fits: one bucket.
  const std::vector<GradBucket> all = plan_grad_buckets(reg, reg.total_floats());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].numel(), reg.total_floats());
  EXPECT_THROW(plan_grad_buckets(reg, 0), Error);
  // Every parameter names its reduction group.
  for (const ParamSpec& p : reg.params()) EXPECT_EQ(p.grad_group, GradGroup::kDataParallel);
  // An MoE model: the expert parameters come last, and each group's buckets
  // tile exactly its own range.
  ModelConfig c = reg.config();
  c.num_experts = 4;
  c.moe_layer_freq = "[0,1,1]";
  const ParamRegistry moe(c, StageLayout{0, 1, 0, 3, true, true});
  const int64_t split = moe.group_begin(GradGroup::kExpertDataParallel);
  ASSERT_LT(split, moe.total_floats());
  for (const ParamSpec& p : moe.params())
    EXPECT_EQ(p.offset >= split, p.grad_group == GradGroup::kExpertDataParallel) << p.name;
  for (GradGroup g : {GradGroup::kDataParallel, GradGroup::kExpertDataParallel}) {
    const std::vector<GradBucket> bs = plan_grad_buckets(moe, 300, 0, g);
    const bool expert = g == GradGroup::kExpertDataParallel;
    EXPECT_EQ(bs.front().end, expert ? moe.total_floats() : split);
    EXPECT_EQ(bs.back().begin, expert ? split : 0);
    for (size_t b = 0; b + 1 < bs.size(); ++b) EXPECT_EQ(bs[b].begin, bs[b + 1].end);
    for (const GradBucket& bk : bs)
      for (size_t i : bk.params) EXPECT_EQ(moe.params()[i].grad_group, g);
  }
}

TEST(GradBuckets, BucketOfMatchesLayout) {
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  std::vector<float> g(size_t(reg.total_floats()), 0.f);
  GradBuckets gb(reg, g.data(), dp, 700, true);
  ASSERT_GT(gb.buckets().size(), 3u);
  for (size_t b = 0; b < gb.buckets().size(); ++b)
    for (size_t i : gb.buckets()[b].params) EXPECT_EQ(gb.bucket_of(i), b);
}

// Integer-valued gradients depending on rank, parameter and element; the
// padding stays zero, as after zero_grads().
float grad_value(int rank, size_t param, int64_t i, int iteration) {
  return float((rank + 1) * (int64_t(param) % 5 + 1) + (i % 11) - 3 * iteration);
}

void fill(std::vector<float>& g, const ParamRegistry& reg, int rank, int iteration) {
  std::fill(g.begin(), g.end(), 0.f);
  for (size_t p = 0; p < reg.params().size(); ++p)
    for (int64_t i = 0; i < reg.params()[p].numel(); ++i)
      g[size_t(reg.params()[p].offset + i)] = grad_value(rank, p, i, iteration);
}

// Exact: integer sums are exact in float, then the same `* (1/dp)` as finish().
void expect_average(const std::vector<float>& g, const ParamRegistry& reg, int dp_size,
                    int iteration) {
  std::vector<float> want(g.size(), 0.f);
  for (size_t p = 0; p < reg.params().size(); ++p)
    for (int64_t i = 0; i < reg.params()[p].numel(); ++i) {
      float sum = 0;
      for (int r = 0; r < dp_size; ++r) sum += grad_value(r, p, i, iteration);
      want[size_t(reg.params()[p].offset + i)] = dp_size > 1 ? sum * (1.f / float(dp_size)) : sum;
    }
  int64_t bad = 0;
  for (size_t k = 0; k < g.size(); ++k)
    if (g[k] != want[k] && bad++ < 5)
      ADD_FAILURE() << "grad[" << k << "] = " << g[k] << ", want " << want[k];
  EXPECT_EQ(bad, 0);
}

class GradBucketsReduce : public ::testing::TestWithParam<bool> {};

TEST_P(GradBucketsReduce, AverageOverRanksInReverseOrder) {
  const bool overlap = GetParam();
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  std::vector<float> g(size_t(reg.total_floats()));
  GradBuckets gb(reg, g.data(), dp, 700, overlap);
  ASSERT_GT(gb.buckets().size(), 3u);
  for (int it = 0; it < 3; ++it) {  // ready flags reset between iterations
    fill(g, reg, dp.rank(), it);
    for (size_t p = reg.params().size(); p-- > 0;) {
      gb.mark_ready(p);
      // With overlap, bucket b is in flight as soon as its last parameter is ready.
      const size_t b = gb.bucket_of(p);
      const bool bucket_done = gb.buckets()[b].params.back() == p;
      EXPECT_EQ(gb.num_launched(), overlap ? (bucket_done ? b + 1 : b) : 0u) << "param " << p;
    }
    gb.finish();
    EXPECT_EQ(gb.num_launched(), 0u);
    expect_average(g, reg, dp.size(), it);
  }
  if (dp.size() == 1) {
    EXPECT_EQ(gb.comm_seconds(), 0.0);  // no MPI at all
  } else {
    EXPECT_GT(gb.comm_seconds(), 0.0);
  }
  gb.reset_timers();
  EXPECT_EQ(gb.comm_seconds(), 0.0);
}

TEST_P(GradBucketsReduce, OutOfOrderAndUnmarkedParameters) {
  const bool overlap = GetParam();
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  std::vector<float> g(size_t(reg.total_floats()));
  GradBuckets gb(reg, g.data(), dp, 700, overlap);
  ASSERT_GT(gb.buckets().size(), 3u);
  fill(g, reg, dp.rank(), 0);
  // Bucket 1 complete before bucket 0: it must wait for bucket 0's launch.
  for (size_t p : gb.buckets()[1].params) gb.mark_ready(p);
  EXPECT_EQ(gb.num_launched(), 0u);
  for (size_t p : gb.buckets()[0].params) gb.mark_ready(p);
  EXPECT_EQ(gb.num_launched(), overlap ? 2u : 0u);
  // Bucket k + 1 complete, bucket k (k >= 2, several parameters) only in part:
  // still two launched; the rest is never marked and finish() launches it.
  size_t k = 2;
  while (k + 1 < gb.buckets().size() && gb.buckets()[k].params.size() < 2) ++k;
  ASSERT_LT(k + 1, gb.buckets().size()) << "no bucket with several parameters";
  for (size_t p : gb.buckets()[k + 1].params) gb.mark_ready(p);
  gb.mark_ready(gb.buckets()[k].params.front());
  EXPECT_EQ(gb.num_launched(), overlap ? 2u : 0u);
  gb.finish();
  expect_average(g, reg, dp.size(), 0);
  // The next iteration may mark everything again, in registry order.
  fill(g, reg, dp.rank(), 1);
  for (size_t p = 0; p < reg.params().size(); ++p) gb.mark_ready(p);
  EXPECT_EQ(gb.num_launched(), overlap ? gb.buckets().size() : 0u);
  gb.finish();
  expect_average(g, reg, dp.size(), 1);
}

TEST_P(GradBucketsReduce, MarkingTwiceThrows) {
  const ParamRegistry reg = small_registry();
  const Communicator dp = Communicator::world();
  std::vector<float> g(size_t(reg.total_floats()), 1.f);
  GradBuckets gb(reg, g.data(), dp, 700, GetParam());
  const size_t p = reg.params().size() - 3;
  gb.mark_ready(p);
  try {
    gb.mark_ready(p);
    ADD_FAILURE() << "no error for marking twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(reg.params()[p].name), std::string::npos) << e.what();
  }
  EXPECT_THROW(gb.mark_ready(reg.params().size()), Error);
  gb.finish();  // all ranks alike: every bucket reduced, ones stay ones
  for (float x : g) ASSERT_FLOAT_EQ(x, 1.f);
  gb.mark_ready(p);  // a new iteration
  gb.finish();
}

INSTANTIATE_TEST_SUITE_P(Overlap, GradBucketsReduce, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("On") : std::string("Off");
                         });

}  // namespace grad_buckets_test
}  // namespace mt
