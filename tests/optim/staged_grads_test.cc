// Megatron-FSDP's optim_grads gradients (optim/staged_grads.h): the staging
// pool holds the embeddings, the loss head and one region that every layer
// shares (each parameter inside its part's region, no two of a part
// overlapping); reducing a part leaves in this rank's shard the average over
// the ranks of what the part's pool range held (exactly, for integer-valued
// data), adds to it on the next reduction, and zeroes the range. Valid for any
// world size (the DP group is the world); CTest also runs it under mpirun -n 2.
#include "optim/staged_grads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "optim_test_util.h"

namespace mt {
namespace staged_grads_test {

TEST(StagedGrads, PoolHoldsEmbeddingsHeadAndTheLargestLayer) {
  const ParamRegistry reg = small_registry();
  const GradPlacement g = plan_staged_grads(reg);
  const int64_t total_layers = reg.config().num_layers;
  ASSERT_EQ(g.offset.size(), reg.params().size());
  // Per part: the lowest and highest pool float its parameters use.
  std::vector<int64_t> lo(size_t(total_layers + 2), INT64_MAX), hi(size_t(total_layers + 2), 0);
  for (size_t i = 0; i < reg.params().size(); ++i) {
    const ParamSpec& p = reg.params()[i];
    const size_t k = size_t(p.part_id(total_layers) + 1);
    lo[k] = std::min(lo[k], g.offset[i]);
    hi[k] = std::max(hi[k], g.offset[i] + p.numel());
    EXPECT_LE(g.offset[i] + p.numel(), g.floats) << p.name;
    for (size_t j = 0; j < i; ++j) {  // no overlap inside a part
      const ParamSpec& q = reg.params()[j];
      if (q.part_id(total_layers) != p.part_id(total_layers)) continue;
      EXPECT_TRUE(g.offset[i] >= g.offset[j] + q.numel() || g.offset[j] >= g.offset[i] + p.numel())
          << p.name << " overlaps " << q.name;
    }
  }
  const size_t emb = 0, head = size_t(total_layers + 1);
  EXPECT_EQ(lo[emb], 0);
  EXPECT_LE(hi[emb], lo[head]);  // embeddings, then the loss head, then the layers
  for (int64_t l = 0; l < total_layers; ++l) {
    EXPECT_EQ(lo[size_t(l + 1)], lo[1]) << "layer " << l << " has a region of its own";
    EXPECT_GE(lo[size_t(l + 1)], hi[head]);
  }
  // Smaller than one gradient per parameter (3 equal layers share one region).
  EXPECT_LT(g.floats, reg.total_floats());
  EXPECT_GE(g.floats, hi[1]);
}

// Integer gradients depending on rank, parameter and element.
float grad_value(int rank, size_t param, int64_t i) {
  return float((rank + 1) * (int64_t(param) % 5 + 1) + (i % 7));
}

TEST(StagedGrads, ReducingAPartAveragesIntoTheShardAndClearsThePool) {
  const ParamRegistry reg = small_registry();
  ModelRuntime rt(reg, 1, TensorParallel{}, 1, Recompute{}, MathMode::kF32, ContextParallel{},
                  Device::kCpu, nullptr, plan_staged_grads(reg));
  const Communicator dp = Communicator::world();
  StagedGrads sg(rt, dp, 300);
  rt.zero_grads();
  const int64_t total_layers = reg.config().num_layers;
  const int n = dp.size();
  // The average over ranks of grad_value (exact in float for these integers).
  auto average = [&](size_t param, int64_t i) {
    double s = 0;
    for (int r = 0; r < n; ++r) s += grad_value(r, param, i);
    return float(s / n);
  };
  for (const int64_t part : {total_layers - 1, int64_t(1), int64_t(-1)}) {
    for (int round = 1; round <= 2; ++round) {  // a second reduction adds to the first
      for (size_t i = 0; i < reg.params().size(); ++i) {
        if (reg.params()[i].part_id(total_layers) != part) continue;
        float* g = rt.grad_of(i);
        for (int64_t k = 0; k < reg.params()[i].numel(); ++k) g[k] = grad_value(dp.rank(), i, k);
      }
      sg.reduce_part(part);
      for (size_t b = 0; b < sg.buckets().size(); ++b) {
        const GradBucket& bk = sg.buckets()[b];
        const size_t first = bk.params.back();
        if (reg.params()[first].part_id(total_layers) != part) continue;
        for (size_t i : bk.params) {  // the pool range is clear
          const float* g = rt.grad_of(i);
          for (int64_t k = 0; k < reg.params()[i].numel(); ++k)
            ASSERT_EQ(g[k], 0.f) << reg.params()[i].name;
        }
        if (sg.shard_offset(b) < 0) continue;
        const FlatRange mine = bk.shard(dp.rank());
        for (int64_t x = mine.begin; x < mine.end; ++x) {
          // The parameter holding flat float x (padding between parameters is 0).
          float want = 0;
          for (size_t i : bk.params) {
            const ParamSpec& p = reg.params()[i];
            if (x >= p.offset && x < p.offset + p.numel()) want = round * average(i, x - p.offset);
          }
          ASSERT_EQ(sg.shard_grads()[sg.shard_offset(b) + (x - mine.begin)], want)
              << "part " << part << " round " << round << " float " << x;
        }
      }
    }
  }
  // The shard is this rank's pieces, in flat order, as the optimizer's ranges.
  int64_t floats = 0;
  for (const FlatRange& r : sg.owned_ranges()) floats += r.size();
  EXPECT_EQ(floats, sg.shard_floats());
  sg.zero();
  for (int64_t i = 0; i < sg.shard_floats(); ++i) ASSERT_EQ(sg.shard_grads()[i], 0.f);
}

}  // namespace staged_grads_test
}  // namespace mt
