#include "comm/parallel_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/mpi_env.h"
#include "core/error.h"

namespace mt {
namespace parallel_state_test {

using Groups = std::vector<std::vector<int>>;

std::string error_of_config(int world, ParallelConfig cfg) {
  try {
    check_parallel_config(world, cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The table of DESIGN.md: TP=2, PP=2, DP=2.
TEST(GroupRanks, World8Tp2Pp2) {
  EXPECT_EQ(group_ranks(GroupKind::kTp, 8, 2, 2), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 8, 2, 2), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kPp, 8, 2, 2), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kModelParallel, 8, 2, 2), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kEmbedding, 8, 2, 2), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kWorld, 8, 2, 2), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

// 2 nodes x 4 ranks, TP=2, PP=2, DP=2 (Megatron's order, TP fastest): TP
// and DP stay inside a node, PP crosses; with 4 nodes x 2 ranks DP crosses too.
TEST(NodeCrossing, SaysWhichGroupsSpanNodes) {
  const std::vector<int> two_nodes = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kTp, 8, 2, 2), two_nodes), "inside nodes");
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kDp, 8, 2, 2), two_nodes), "inside nodes");
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kPp, 8, 2, 2), two_nodes),
            "crosses nodes: 4 of 4 groups span 2 nodes");
  const std::vector<int> four_nodes = {0, 0, 1, 1, 2, 2, 3, 3};
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kTp, 8, 2, 2), four_nodes), "inside nodes");
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kDp, 8, 2, 2), four_nodes),
            "crosses nodes: 4 of 4 groups span 2 nodes");
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kWorld, 8, 2, 2), four_nodes),
            "crosses nodes: 1 of 1 groups span 4 nodes");
  // Ranks placed round-robin over 2 nodes: TP crosses.
  const std::vector<int> round_robin = {0, 1, 0, 1, 0, 1, 0, 1};
  EXPECT_EQ(node_crossing(group_ranks(GroupKind::kTp, 8, 2, 2), round_robin),
            "crosses nodes: 4 of 4 groups span 2 nodes");
}

TEST(GroupRanks, World4Tp1Pp2) {  // DP = 2
  EXPECT_EQ(group_ranks(GroupKind::kTp, 4, 1, 2), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 4, 1, 2), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(group_ranks(GroupKind::kPp, 4, 1, 2), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(group_ranks(GroupKind::kModelParallel, 4, 1, 2), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(group_ranks(GroupKind::kEmbedding, 4, 1, 2), (Groups{{0, 2}, {1, 3}}));
}

TEST(GroupRanks, World4Tp4Pp1) {  // pure TP: DP = 1
  EXPECT_EQ(group_ranks(GroupKind::kTp, 4, 4, 1), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 4, 4, 1), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(group_ranks(GroupKind::kPp, 4, 4, 1), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(group_ranks(GroupKind::kModelParallel, 4, 4, 1), (Groups{{0, 1, 2, 3}}));
  // Without pipelining every rank holds the (untied-across-stages) embedding.
  EXPECT_EQ(group_ranks(GroupKind::kEmbedding, 4, 4, 1), (Groups{{0}, {1}, {2}, {3}}));
}

TEST(GroupRanks, World12Tp2Pp3MiddleStageHasNoEmbedding) {  // DP = 2
  EXPECT_EQ(group_ranks(GroupKind::kPp, 12, 2, 3),
            (Groups{{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}}));
  EXPECT_EQ(group_ranks(GroupKind::kEmbedding, 12, 2, 3),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 12, 2, 3),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}}));
  EXPECT_EQ(group_ranks(GroupKind::kModelParallel, 12, 2, 3),
            (Groups{{0, 1, 4, 5, 8, 9}, {2, 3, 6, 7, 10, 11}}));
}

TEST(GroupRanks, PureDataParallel) {
  EXPECT_EQ(group_ranks(GroupKind::kDp, 3, 1, 1), (Groups{{0, 1, 2}}));
  EXPECT_EQ(group_ranks(GroupKind::kTp, 3, 1, 1), (Groups{{0}, {1}, {2}}));
  EXPECT_EQ(group_ranks(GroupKind::kWorld, 1, 1, 1), (Groups{{0}}));
}

TEST(ParallelConfigCheck, MisfitNamesTheNumbersAndTheFix) {
  const std::string err = error_of_config(6, {4, 1, 1});
  EXPECT_NE(err.find("world size 6"), std::string::npos) << err;
  EXPECT_NE(err.find("TP(4)"), std::string::npos) << err;
  EXPECT_NE(err.find("PP(1)"), std::string::npos) << err;
  EXPECT_NE(err.find("= 4"), std::string::npos) << err;
  EXPECT_NE(err.find("mpirun -n 8"), std::string::npos) << err;
  EXPECT_NE(err.find("fix:"), std::string::npos) << err;
  EXPECT_THROW(group_ranks(GroupKind::kTp, 6, 4, 1), Error);

  EXPECT_NE(error_of_config(8, {2, 3, 1}).find("TP(2) x PP(3) = 6"), std::string::npos);
  EXPECT_NE(error_of_config(4, {0, 1, 1}).find("TP=0"), std::string::npos);
  EXPECT_NE(error_of_config(4, {1, 1, 2}).find("VPP=2"), std::string::npos);
  EXPECT_EQ(error_of_config(8, {2, 2, 1}), "");
  EXPECT_EQ(error_of_config(8, {1, 4, 2}), "");
}

// Every layout that fits the real world (1 plain, 2 under mpirun -n 2).
TEST(ParallelState, BuildsEveryFittingLayoutOfTheRealWorld) {
  const int world = world_size_or_one(), me = world_rank_or_zero();
  for (int tp = 1; tp <= world; ++tp)
    for (int pp = 1; pp <= world / tp; ++pp) {
      if (world % (tp * pp)) continue;
      ParallelState ps(ParallelConfig{tp, pp, 1});
      SCOPED_TRACE(ps.layout());
      const int dp = world / (tp * pp);
      EXPECT_EQ(ps.world_rank, me);
      EXPECT_EQ(ps.world_size, world);
      EXPECT_EQ(ps.tp_size, tp);
      EXPECT_EQ(ps.pp_size, pp);
      EXPECT_EQ(ps.dp_size, dp);
      EXPECT_EQ(mesh_rank(ps.tp_rank, ps.dp_rank, ps.pp_rank, tp, dp), me);
      EXPECT_EQ(ps.pp_is_first_stage, ps.pp_rank == 0);
      EXPECT_EQ(ps.pp_is_last_stage, ps.pp_rank == pp - 1);
      EXPECT_EQ(ps.pp_next_rank, mesh_rank(ps.tp_rank, ps.dp_rank, (ps.pp_rank + 1) % pp, tp, dp));
      EXPECT_EQ(ps.pp_prev_rank,
                mesh_rank(ps.tp_rank, ps.dp_rank, (ps.pp_rank + pp - 1) % pp, tp, dp));
      EXPECT_EQ(ps.layout(), "TP(" + std::to_string(tp) + ")-PP(" + std::to_string(pp) + ")-DP(" +
                                 std::to_string(dp) + ")");
      EXPECT_NE(ps.describe_groups().find("tp: "), std::string::npos);
      EXPECT_NE(ps.describe_groups().find("*["), std::string::npos);
      EXPECT_NE(ps.describe_groups().find("nodes: "), std::string::npos);
      EXPECT_NE(ps.describe_groups().find("(inside nodes)"), std::string::npos);  // one host
      EXPECT_EQ(ps.node_of_rank.size(), size_t(ps.world_size));

      // Summing the world rank over each group gives the sum of the group's
      // members from the pure table: the communicators are the table's groups.
      for (GroupKind kind : {GroupKind::kTp, GroupKind::kDp, GroupKind::kPp,
                             GroupKind::kModelParallel, GroupKind::kEmbedding, GroupKind::kWorld}) {
        const Communicator& c = ps.comm(kind);
        std::vector<int> mine;
        for (const auto& g : group_ranks(kind, world, tp, pp))
          if (std::find(g.begin(), g.end(), me) != g.end()) mine = g;
        EXPECT_EQ(c.is_member(), !mine.empty()) << group_kind_name(kind);
        EXPECT_EQ(c.name(), group_kind_name(kind));
        if (!c.is_member()) continue;
        EXPECT_EQ(c.size(), int(mine.size())) << group_kind_name(kind);
        EXPECT_EQ(mine[size_t(c.rank())], me) << group_kind_name(kind);
        double sum = me, want = 0;
        for (int r : mine) want += r;
        c.all_reduce_sum(&sum, 1);
        EXPECT_EQ(sum, want) << group_kind_name(kind);
      }
    }
}

TEST(ParallelState, MisfitThrowsOnEveryRankBeforeCommunicating) {
  const int world = world_size_or_one();
  try {
    ParallelState ps(ParallelConfig{world + 1, 1, 1});
    ADD_FAILURE() << "a TP size larger than the world was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("world size " + std::to_string(world)), std::string::npos) << msg;
    EXPECT_NE(msg.find("TP(" + std::to_string(world + 1) + ")"), std::string::npos) << msg;
  }
}

}  // namespace parallel_state_test
}  // namespace mt
