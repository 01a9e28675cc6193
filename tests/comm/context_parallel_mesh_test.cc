// The context-parallel axis of the mesh: rank order tp-cp-dp-pp (Megatron's
// RankGenerator), the CP groups, the DP x CP groups gradients are reduced
// over, and CP's misfits.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "comm/parallel_state.h"

namespace mt {
namespace context_parallel_mesh_test {

using Groups = std::vector<std::vector<int>>;

// Megatron-LM's own example layout: TP=2, CP=2, DP=2 on 8 ranks.
TEST(ContextParallelMesh, World8Tp2Cp2Dp2) {
  EXPECT_EQ(group_ranks(GroupKind::kTp, 8, 2, 1, 2), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kCp, 8, 2, 1, 2), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 8, 2, 1, 2), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kDpCp, 8, 2, 1, 2), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kPp, 8, 2, 1, 2),
            (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(group_ranks(GroupKind::kModelParallel, 8, 2, 1, 2),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kWorld, 8, 2, 1, 2), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

// CP=2, PP=2, DP=2 (TP=1): CP is the fastest axis, PP the slowest.
TEST(ContextParallelMesh, World8Cp2Pp2Dp2) {
  EXPECT_EQ(group_ranks(GroupKind::kCp, 8, 1, 2, 2), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kDp, 8, 1, 2, 2), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kDpCp, 8, 1, 2, 2), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kPp, 8, 1, 2, 2), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(group_ranks(GroupKind::kEmbedding, 8, 1, 2, 2),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // The model-parallel group (TP x PP) leaves CP out: weights are replicated over CP.
  EXPECT_EQ(group_ranks(GroupKind::kModelParallel, 8, 1, 2, 2),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

// At CP = 1 the DP x CP group is the DP group and each CP group one rank.
TEST(ContextParallelMesh, CpOneChangesNothing) {
  for (int world : {1, 4, 8, 12})
    for (int tp : {1, 2})
      for (int pp : {1, 2}) {
        if (world % (tp * pp)) continue;
        for (GroupKind kind : {GroupKind::kTp, GroupKind::kDp, GroupKind::kPp,
                               GroupKind::kModelParallel, GroupKind::kEmbedding})
          EXPECT_EQ(group_ranks(kind, world, tp, pp, 1), group_ranks(kind, world, tp, pp));
        EXPECT_EQ(group_ranks(GroupKind::kDpCp, world, tp, pp, 1),
                  group_ranks(GroupKind::kDp, world, tp, pp));
        EXPECT_EQ(group_ranks(GroupKind::kCp, world, tp, pp, 1).size(), size_t(world));
      }
}

// For every layout up to 24 ranks (CP = 1 included: the tp-dp-pp mesh): each
// kind partitions the world, and each group's members share exactly the
// coordinates they should (t, c, d, p).
TEST(ContextParallelMesh, EveryKindPartitionsTheWorldConsistently) {
  for (int world = 1; world <= 24; ++world)
    for (int tp = 1; tp <= world; ++tp)
      for (int cp = 1; cp <= world / tp; ++cp)
        for (int pp = 1; pp <= world / (tp * cp); ++pp) {
          if (world % (tp * cp * pp)) continue;
          const int dp = world / (tp * cp * pp);
          auto coords = [&](int r) {
            return std::vector<int>{r % tp, (r / tp) % cp, (r / (tp * cp)) % dp, r / (tp * cp * dp)};
          };
          const GroupKind kinds[] = {GroupKind::kTp, GroupKind::kCp, GroupKind::kDp,
                                     GroupKind::kDpCp, GroupKind::kPp, GroupKind::kModelParallel};
          const int sizes[] = {tp, cp, dp, dp * cp, pp, tp * pp};
          const int varying[][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0},
                                    {0, 1, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 1}};
          for (int k = 0; k < 6; ++k) {
            std::vector<int> seen(size_t(world), 0);
            for (const auto& g : group_ranks(kinds[k], world, tp, pp, cp)) {
              ASSERT_EQ(int(g.size()), sizes[k]) << world << " " << tp << " " << cp << " " << pp;
              ASSERT_TRUE(std::is_sorted(g.begin(), g.end()));
              for (int r : g) {
                ++seen[size_t(r)];
                for (int c = 0; c < 4; ++c) {
                  if (!varying[k][c]) {
                    ASSERT_EQ(coords(r)[size_t(c)], coords(g[0])[size_t(c)]) << k;
                  }
                }
              }
            }
            for (int r = 0; r < world; ++r) ASSERT_EQ(seen[size_t(r)], 1) << "rank " << r;
          }
          for (int r = 0; r < world; ++r) {
            const auto c = coords(r);
            ASSERT_EQ(mesh_rank(c[0], c[1], c[2], c[3], tp, cp, dp), r);
            if (cp == 1) {  // the CP-free form
              ASSERT_EQ(mesh_rank(c[0], c[2], c[3], tp, dp), r);
            }
          }
        }
}

TEST(ContextParallelMesh, MisfitNamesCp) {
  ParallelConfig cfg;
  cfg.tp = 2;
  cfg.cp = 2;
  std::string err;
  try {
    check_parallel_config(6, cfg);
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("world size 6"), std::string::npos) << err;
  EXPECT_NE(err.find("TP(2) x PP(1) x CP(2) = 4"), std::string::npos) << err;
  EXPECT_NE(err.find("mpirun -n 8"), std::string::npos) << err;
  cfg.cp = 0;
  EXPECT_THROW(check_parallel_config(4, cfg), Error);
  EXPECT_THROW(group_ranks(GroupKind::kCp, 6, 2, 1, 2), Error);
}

// Every CP layout of the real world (under mpirun -n 2: CP=2; n 3: CP=3):
// coordinates, the layout string, and communicators that are the table's groups.
TEST(ContextParallelMesh, BuildsTheCpLayoutsOfTheRealWorld) {
  int world = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  for (int cp = 1; cp <= world; ++cp) {
    if (world % cp) continue;
    ParallelConfig cfg;
    cfg.cp = cp;
    ParallelState ps(cfg);
    SCOPED_TRACE(ps.layout());
    EXPECT_EQ(ps.cp_size, cp);
    EXPECT_EQ(ps.cp_rank, me % cp);
    EXPECT_EQ(ps.dp_size, world / cp);
    EXPECT_EQ(ps.dp_rank, me / cp);
    EXPECT_EQ(ps.dp_cp_size, world);
    EXPECT_EQ(ps.dp_cp_rank, me);
    EXPECT_EQ(mesh_rank(ps.tp_rank, ps.cp_rank, ps.dp_rank, ps.pp_rank, 1, cp, ps.dp_size), me);
    if (cp > 1) {
      EXPECT_EQ(ps.layout(), "TP(1)-CP(" + std::to_string(cp) + ")-PP(1)-DP(" +
                                 std::to_string(world / cp) + ")");
      EXPECT_NE(ps.describe_groups().find("\ncp: "), std::string::npos) << ps.describe_groups();
      EXPECT_NE(ps.describe_groups().find("\ndp_cp: "), std::string::npos);
      EXPECT_EQ(ps.dp_cp().name(), "dp_cp");
    } else {
      EXPECT_EQ(ps.describe_groups().find("cp: "), std::string::npos) << ps.describe_groups();
      EXPECT_EQ(&ps.dp_cp(), &ps.dp_comm);  // the same communicator, named "dp"
    }
    for (GroupKind kind : {GroupKind::kCp, GroupKind::kDp, GroupKind::kDpCp, GroupKind::kTp,
                           GroupKind::kModelParallel, GroupKind::kEmbedding}) {
      const Communicator& c = ps.comm(kind);
      std::vector<int> mine;
      for (const auto& g : group_ranks(kind, world, 1, 1, cp))
        if (std::find(g.begin(), g.end(), me) != g.end()) mine = g;
      ASSERT_TRUE(c.is_member()) << group_kind_name(kind);
      EXPECT_EQ(c.size(), int(mine.size())) << group_kind_name(kind);
      EXPECT_EQ(mine[size_t(c.rank())], me) << group_kind_name(kind);
      double sum = me, want = 0;
      for (int r : mine) want += r;
      c.all_reduce_sum(&sum, 1);
      EXPECT_EQ(sum, want) << group_kind_name(kind);
    }
  }
}

}  // namespace context_parallel_mesh_test
}  // namespace mt
