// ParallelState: where this rank sits in the TP x CP x DP x PP mesh and the
// communicators of its groups. Built once from MPI_COMM_WORLD and a
// ParallelConfig, then passed by reference (no globals; Megatron's
// parallel_state module as an object).
//
// Rank order tp-cp-dp-pp, TP fastest (as Megatron-LM's RankGenerator):
//   world_rank = tp_rank + tp_size * (cp_rank + cp_size * (dp_rank + dp_size * pp_rank))
// Every group is one generator's answer (axis_groups): the ranks that differ
// only in the group's axes. With TP=2, PP=2, DP=2 (CP=1): TP groups {0,1}
// {2,3} {4,5} {6,7}; DP groups {0,2} {1,3} {4,6} {5,7}; PP groups {0,4} {1,5}
// {2,6} {3,7}; model-parallel groups (TP x PP with the same dp_rank and
// cp_rank) {0,1,4,5} {2,3,6,7}; embedding groups (first and last stage of each
// pipeline) {0,4} {1,5} {2,6} {3,7}. Context parallelism (CP) adds the CP
// groups and the DP x CP groups over which gradients are reduced and the
// distributed optimizer shards (Megatron's data-parallel group
// with_context_parallel=True); the plain DP group is what the data loader uses.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace mt {

struct ParallelConfig {
  int tp = 1;   // tensor-parallel size
  int pp = 1;   // pipeline-parallel size
  int vpp = 1;  // virtual pipeline stages per rank (interleaved 1F1B)
  int cp = 1;   // context-parallel size
  int ep = 1;   // expert-parallel size (MoE): experts split over EP ranks
  int etp = 1;  // expert tensor-parallel size (1: each expert whole on its rank)
};

enum class GroupKind {
  kTp, kCp, kDp, kDpCp, kPp, kModelParallel, kEmbedding, kWorld,
  kEp, kExpertDp, kExpertMp
};

// "tp", "cp", "dp", "dp_cp", "pp", "mp", "embd", "world", "ep", "edp",
// "emp": the Communicator names.
const char* group_kind_name(GroupKind kind);

// Throws mt::Error, naming the numbers and the fix, unless the world splits
// into TP x CP x PP x DP (and vpp fits pp). Every rank calls it before any
// communication, so each reports the same misfit.
void check_parallel_config(int world, const ParallelConfig& cfg);

// The mesh axes in rank order, fastest first (tp-cp-dp-pp).
enum MeshAxis { kAxisTp = 0, kAxisCp = 1, kAxisDp = 2, kAxisPp = 3, kMeshAxes = 4 };

// The one group generator: for mesh sizes {tp, cp, dp, pp}, every group of
// ranks that differ only along the axes in `in_group` (the other coordinates
// fixed). Groups are listed with the fixed coordinates counting up, the first
// axis fastest; ranks inside a group likewise (so each group is sorted).
std::vector<std::vector<int>> axis_groups(const int (&sizes)[kMeshAxes],
                                          const bool (&in_group)[kMeshAxes]);

// All groups of one kind for a world of `world` ranks, each as a sorted list
// of world ranks, in a fixed order (the order used to build communicators).
// Pure: the layout can be tested for any world size without processes.
//
// Expert groups (MoE; Megatron's expert RankGenerator, order tp-ep-dp-pp with
// the expert tensor-parallel size 1): inside one pipeline stage the TP x CP x
// DP ranks are re-read as EP x expert-DP, EP fastest: ep_rank = i % EP,
// edp_rank = i / EP for the stage's i-th rank. kEp: the ranks that hold the
// different experts (a token exchange); kExpertDp: the replicas of the same
// experts (their gradients are averaged there); kExpertMp: EP x PP (every
// expert once: the gradient norm's sum of expert parameters).
std::vector<std::vector<int>> group_ranks(GroupKind kind, int world, int tp, int pp, int cp = 1,
                                          int ep = 1);

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
  int cp_rank = 0, cp_size = 1;
  int dp_rank = 0, dp_size = 1;
  int dp_cp_rank = 0, dp_cp_size = 1;  // cp_rank + cp_size * dp_rank, dp_size * cp_size
  int pp_rank = 0, pp_size = 1;
  int vpp_size = 1;
  int ep_rank = 0, ep_size = 1;    // expert parallelism (MoE)
  int edp_rank = 0, edp_size = 1;  // expert data parallelism: (TP x CP x DP) / EP
  bool pp_is_first_stage = true;
  bool pp_is_last_stage = true;
  // World ranks of the next / previous pipeline stage, wrapping around (the
  // last stage's next is the first, as in Megatron); self when pp_size == 1.
  int pp_next_rank = 0;
  int pp_prev_rank = 0;
  // True if this rank holds the tied embedding (first or last stage).
  bool in_embedding_group = true;

  Communicator tp_comm;     // same cp_rank, dp_rank and pp_rank
  Communicator cp_comm;     // same tp_rank, dp_rank and pp_rank, ordered by cp_rank
  Communicator dp_comm;     // same tp_rank, cp_rank and pp_rank (the data loader's)
  Communicator dp_cp_comm;  // same tp_rank and pp_rank; built only when CP > 1 (use dp_cp())
  Communicator pp_comm;     // same tp_rank, cp_rank and dp_rank, ordered by pp_rank
  Communicator mp_comm;     // same cp_rank and dp_rank (TP x PP ranks)
  Communicator embd_comm;   // first + last stage of this pipeline; null elsewhere
  Communicator world_comm;  // everyone
  // Expert groups (MoE): with EP = 1, ep_comm is this rank alone and
  // edp_comm the stage's TP x CP x DP ranks (each holds every expert whole).
  Communicator ep_comm;     // the stage's ranks with the same edp_rank
  Communicator edp_comm;    // the stage's ranks with the same ep_rank
  Communicator emp_comm;    // same edp_rank, every stage (EP x PP)

  // Node (host) of every world rank, by MPI_Get_processor_name: names in
  // order of first appearance, and each rank's index into them.
  std::vector<std::string> node_names;
  std::vector<int> node_of_rank;

  // "TP(2)-PP(1)-DP(2)", with "-CP(2)" after TP when CP > 1
  std::string layout() const;
  // One line per group kind listing every group's world ranks and whether
  // they cross nodes, e.g. "tp: *[0,1] [2,3]  (inside nodes)", this rank's
  // group marked with '*', after one line naming the nodes' ranks.
  std::string describe_groups() const;
  const Communicator& comm(GroupKind kind) const;
  // Every group's calls go to `timeline` (null: none); see Communicator::set_timeline.
  void set_timeline(Timeline* timeline);
  // The recorder the groups report to (null: none).
  Timeline* timeline() const { return world_comm.timeline(); }
  // The group gradients are averaged over and the distributed optimizer
  // shards over: DP x CP (dp_comm itself at CP = 1).
  const Communicator& dp_cp() const { return cp_size > 1 ? dp_cp_comm : dp_comm; }
};

// World rank of mesh coordinates (tp_rank, cp_rank, dp_rank, pp_rank).
inline int mesh_rank(int tp_rank, int cp_rank, int dp_rank, int pp_rank, int tp, int cp, int dp) {
  return tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank));
}
// The same without context parallelism (CP = 1).
inline int mesh_rank(int tp_rank, int dp_rank, int pp_rank, int tp, int dp) {
  return mesh_rank(tp_rank, 0, dp_rank, pp_rank, tp, 1, dp);
}

}  // namespace mt
