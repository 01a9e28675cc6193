// megatron::ParallelState (include/megatron/parallel_state.h) at 1 rank and
// under `mpirun -n 2`: each layout's group sizes, this rank's coordinates and
// groups' world ranks as Megatron's rank order gives them, a sum over a group
// equal to the sum of its members' values, and a world that does not split
// into the sizes refused by name before any communication.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "megatron/parallel_state.h"
#include "mpi_world.h"

namespace parallel_state_test {

using megatron::Group;

using mt::test::world_rank;
using mt::test::world_size;

TEST(PublicParallelState, TensorParallelOverTheWorld) {
  const int w = world_size(), me = world_rank();
  megatron::ParallelState ps({.tensor_parallel = w});
  EXPECT_EQ(ps.size(Group::kTensor), w);
  EXPECT_EQ(ps.rank(Group::kTensor), me);
  EXPECT_EQ(ps.size(Group::kData), 1);
  EXPECT_EQ(ps.size(Group::kWorld), w);
  std::vector<int> all;
  for (int r = 0; r < w; ++r) all.push_back(r);
  EXPECT_EQ(ps.group_ranks(Group::kTensor), all);
  EXPECT_EQ(ps.group_ranks(Group::kData), std::vector<int>{me});
  EXPECT_EQ(ps.describe(), "TP(" + std::to_string(w) + ")-PP(1)-DP(1)");
  float x[2] = {float(me + 1), float(10 * (me + 1))};
  ps.all_reduce_sum(Group::kTensor, x, 2);
  EXPECT_EQ(x[0], float(w * (w + 1) / 2));
  EXPECT_EQ(x[1], float(10 * w * (w + 1) / 2));
  float m = float(me);
  ps.all_reduce_max(Group::kTensor, &m, 1);
  EXPECT_EQ(m, float(w - 1));
}

TEST(PublicParallelState, DataParallelIsWhatIsLeft) {
  const int w = world_size(), me = world_rank();
  megatron::ParallelState ps({});
  EXPECT_EQ(ps.size(Group::kData), w);
  EXPECT_EQ(ps.rank(Group::kData), me);
  EXPECT_EQ(ps.size(Group::kTensor), 1);
  EXPECT_TRUE(ps.first_stage());
  EXPECT_TRUE(ps.last_stage());
  double d = 0.5 * (me + 1);
  ps.all_reduce_sum(Group::kDataContext, &d, 1);
  EXPECT_EQ(d, 0.25 * w * (w + 1));
  // A sum over the tensor group (this rank alone) leaves the value as it was.
  float x = float(me + 7);
  ps.all_reduce_sum(Group::kTensor, &x, 1);
  EXPECT_EQ(x, float(me + 7));
}

TEST(PublicParallelState, PipelineStagesAndBroadcast) {
  const int w = world_size(), me = world_rank();
  megatron::ParallelState ps({.pipeline_parallel = w});
  EXPECT_EQ(ps.rank(Group::kPipeline), me);
  EXPECT_EQ(ps.first_stage(), me == 0);
  EXPECT_EQ(ps.last_stage(), me == w - 1);
  int value = me == w - 1 ? 42 : -1;
  ps.broadcast(Group::kPipeline, &value, sizeof value, w - 1);
  EXPECT_EQ(value, 42);
  ps.barrier(Group::kWorld);
}

TEST(PublicParallelState, AWorldThatDoesNotSplitIsRefusedNamingTheSizes) {
  try {
    megatron::ParallelState ps({.tensor_parallel = 3});
    FAIL() << "TP 3 accepted on " << world_size() << " ranks";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("3"), std::string::npos) << what;
    EXPECT_NE(what.find("world size " + std::to_string(world_size())), std::string::npos) << what;
  }
}

}  // namespace parallel_state_test
