// ParallelState: where this rank sits in the TP x DP x PP mesh and the
// communicators of its groups. Built once from MPI_COMM_WORLD and a
// ParallelConfig, then passed by reference (no globals; Megatron's
// parallel_state module as an object).
//
// Rank order tp-dp-pp, TP fastest (as Megatron-LM):
//   world_rank = tp_rank + tp_size * (dp_rank + dp_size * pp_rank)
// With TP=2, PP=2, DP=2: TP groups {0,1} {2,3} {4,5} {6,7}; DP groups {0,2}
// {1,3} {4,6} {5,7}; PP groups {0,4} {1,5} {2,6} {3,7}; model-parallel
// groups (TP x PP with the same dp_rank) {0,1,4,5} {2,3,6,7}; embedding groups
// (first and last stage of each pipeline) {0,4} {1,5} {2,6} {3,7}.
#pragma once
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace mt {

struct ParallelConfig {
  int tp = 1;   // tensor-parallel size
  int pp = 1;   // pipeline-parallel size
  int vpp = 1;  // virtual pipeline stages per rank (interleaved 1F1B)
};

enum class GroupKind { kTp, kDp, kPp, kModelParallel, kEmbedding, kWorld };

// "tp", "dp", "pp", "mp", "embd", "world": the Communicator names.
const char* group_kind_name(GroupKind kind);

// Throws mt::Error, naming the numbers and the fix, unless the world splits
// into TP x PP x DP (and vpp fits pp). Every rank calls it before any
// communication, so each reports the same misfit.
void check_parallel_config(int world, const ParallelConfig& cfg);

// All groups of one kind for a world of `world` ranks, each as a sorted list
// of world ranks, in a fixed order (the order used to build communicators).
// Pure: the layout can be tested for any world size without processes.
std::vector<std::vector<int>> group_ranks(GroupKind kind, int world, int tp, int pp);

// How `groups` sit on nodes (node_of_rank[r]: the node index of world rank
// r): "inside nodes", or "crosses nodes: 2 of 4 groups span 2 nodes" (the
// most nodes one group spans). Pure, for tests.
std::string node_crossing(const std::vector<std::vector<int>>& groups,
                          const std::vector<int>& node_of_rank);

class ParallelState {
 public:
  // Collective over MPI_COMM_WORLD: every rank must construct it with the
  // same config. Throws (before any communication) on a misfit.
  explicit ParallelState(const ParallelConfig& cfg);
  ParallelState(const ParallelState&) = delete;
  ParallelState& operator=(const ParallelState&) = delete;

  int world_rank = 0, world_size = 1;
  int tp_rank = 0, tp_size = 1;
  int dp_rank = 0, dp_size = 1;
  int pp_rank = 0, pp_size = 1;
  int vpp_size = 1;
  bool pp_is_first_stage = true;
  bool pp_is_last_stage = true;
  // World ranks of the next / previous pipeline stage, wrapping around (the
  // last stage's next is the first, as in Megatron); self when pp_size == 1.
  int pp_next_rank = 0;
  int pp_prev_rank = 0;
  // True if this rank holds the tied embedding (first or last stage).
  bool in_embedding_group = true;

  Communicator tp_comm;     // same dp_rank and pp_rank
  Communicator dp_comm;     // same tp_rank and pp_rank
  Communicator pp_comm;     // same tp_rank and dp_rank, ordered by pp_rank
  Communicator mp_comm;     // same dp_rank (TP x PP ranks)
  Communicator embd_comm;   // first + last stage of this pipeline; null elsewhere
  Communicator world_comm;  // everyone

  // Node (host) of every world rank, by MPI_Get_processor_name: names in
  // order of first appearance, and each rank's index into them.
  std::vector<std::string> node_names;
  std::vector<int> node_of_rank;

  // "TP(2)-PP(1)-DP(2)"
  std::string layout() const;
  // One line per group kind listing every group's world ranks and whether
  // they cross nodes, e.g. "tp: *[0,1] [2,3]  (inside nodes)", this rank's
  // group marked with '*', after one line naming the nodes' ranks.
  std::string describe_groups() const;
  const Communicator& comm(GroupKind kind) const;
};

// World rank of mesh coordinates (tp_rank, dp_rank, pp_rank).
inline int mesh_rank(int tp_rank, int dp_rank, int pp_rank, int tp, int dp) {
  return tp_rank + tp * (dp_rank + dp * pp_rank);
}

}  // namespace mt
