#include "comm/parallel_state.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "comm/mpi_env.h"
#include "core/error.h"

namespace mt {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kDpCp:
      return "dp_cp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kModelParallel:
      return "mp";
    case GroupKind::kEmbedding:
      return "embd";
    case GroupKind::kWorld:
      return "world";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kExpertDp:
      return "edp";
    case GroupKind::kExpertMp:
      return "emp";
  }
  return "?";
}

void check_parallel_config(int world, const ParallelConfig& cfg) {
  MT_CHECK(world >= 1, "world size ", world, " must be at least 1");
  MT_CHECK(cfg.tp >= 1 && cfg.pp >= 1 && cfg.vpp >= 1 && cfg.cp >= 1,
           "parallel sizes must be >= 1, got TP=", cfg.tp, " PP=", cfg.pp, " VPP=", cfg.vpp,
           " CP=", cfg.cp,
           "; fix: pass positive --tensor-model-parallel-size / --pipeline-model-parallel-size / "
           "--context-parallel-size");
  // int64: TP x CP x PP of int flags may not fit int.
  const int64_t mp = int64_t(cfg.tp) * cfg.pp * cfg.cp;
  const std::string cp = cfg.cp > 1 ? " x CP(" + std::to_string(cfg.cp) + ")" : "";
  MT_CHECK(world % mp == 0, "world size ", world, " is not divisible by TP(", cfg.tp, ") x PP(",
           cfg.pp, ")", cp, " = ", mp, "; fix: launch a multiple of ", mp, " ranks (e.g. mpirun -n ",
           mp * std::max<int64_t>(1, (world + mp - 1) / mp), ") or choose sizes whose product divides ",
           world);
  const int64_t stage = world / mp * cfg.tp * cfg.cp;  // TP x CP x DP
  MT_CHECK(cfg.ep >= 1, "--expert-model-parallel-size ", cfg.ep,
           " must be >= 1; fix: leave it out (1: no expert parallelism) or give a size that "
           "divides --num-experts and TP x CP x DP = ", stage);
  MT_CHECK(stage % cfg.ep == 0, "--expert-model-parallel-size ", cfg.ep,
           " does not divide the ", stage, " ranks of a pipeline stage (TP x CP x DP = ",
           cfg.tp, " x ", cfg.cp, " x ", world / mp,
           "); fix: choose EP dividing TP x CP x DP, or launch more ranks");
  MT_CHECK(cfg.etp == 1, "--expert-tensor-parallel-size ", cfg.etp,
           " is not implemented (experts are whole on their EP rank); fix: pass "
           "--expert-tensor-parallel-size 1");
  MT_CHECK(cfg.vpp == 1 || cfg.pp > 1, "virtual pipeline stages VPP=", cfg.vpp,
           " need pipeline parallelism, but PP=", cfg.pp,
           "; fix: use PP >= 2 with interleaving, or VPP=1");
}

std::vector<std::vector<int>> axis_groups(const int (&sizes)[kMeshAxes],
                                          const bool (&in_group)[kMeshAxes]) {
  int stride[kMeshAxes];
  int world = 1, members = 1;
  for (int a = 0; a < kMeshAxes; ++a) {
    stride[a] = world;
    world *= sizes[a];
    if (in_group[a]) members *= sizes[a];
  }
  // The rank of the i-th combination of the axes selected by `want`, the first fastest.
  auto rank_of = [&](int i, bool want) {
    int r = 0;
    for (int a = 0; a < kMeshAxes; ++a)
      if (in_group[a] == want) {
        r += (i % sizes[a]) * stride[a];
        i /= sizes[a];
      }
    return r;
  };
  std::vector<std::vector<int>> groups;
  for (int outer = 0; outer < world / members; ++outer) {
    std::vector<int> g;
    for (int inner = 0; inner < members; ++inner) g.push_back(rank_of(outer, false) + rank_of(inner, true));
    groups.push_back(g);
  }
  return groups;
}

std::vector<std::vector<int>> group_ranks(GroupKind kind, int world, int tp, int pp, int cp,
                                          int ep) {
  ParallelConfig cfg;
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.cp = cp;
  cfg.ep = ep;
  check_parallel_config(world, cfg);
  const int sizes[kMeshAxes] = {tp, cp, world / (tp * pp * cp), pp};
  auto groups_of = [&](bool t, bool c, bool d, bool p) {
    const bool axes[kMeshAxes] = {t, c, d, p};
    return axis_groups(sizes, axes);
  };
  // The expert mesh: ETP (1), EP, expert-DP, PP in the same four slots.
  const int expert_sizes[kMeshAxes] = {1, ep, world / (pp * ep), pp};
  auto expert_groups_of = [&](bool e, bool d, bool p) {
    const bool axes[kMeshAxes] = {false, e, d, p};
    return axis_groups(expert_sizes, axes);
  };
  switch (kind) {
    case GroupKind::kTp:
      return groups_of(true, false, false, false);
    case GroupKind::kCp:
      return groups_of(false, true, false, false);
    case GroupKind::kDp:
      return groups_of(false, false, true, false);
    case GroupKind::kDpCp:
      return groups_of(false, true, true, false);
    case GroupKind::kPp:
      return groups_of(false, false, false, true);
    case GroupKind::kEmbedding: {
      auto groups = groups_of(false, false, false, true);
      if (pp > 1)
        for (auto& g : groups) g = {g.front(), g.back()};
      return groups;
    }
    case GroupKind::kModelParallel:
      return groups_of(true, false, false, true);
    case GroupKind::kWorld:
      return groups_of(true, true, true, true);
    case GroupKind::kEp:
      return expert_groups_of(true, false, false);
    case GroupKind::kExpertDp:
      return expert_groups_of(false, true, false);
    case GroupKind::kExpertMp:
      return expert_groups_of(true, false, true);
  }
  MT_FAIL("unknown group kind ", int(kind));
}

namespace {

// Builds this rank's communicator of `kind` by splitting `world` (collective:
// every rank calls it). Ranks in no group get a null one.
Communicator split(const Communicator& world, GroupKind kind, int tp, int pp, int cp, int ep) {
  const auto groups = group_ranks(kind, world.size(), tp, pp, cp, ep);
  int color = -1, key = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    auto it = std::find(g.begin(), g.end(), world.rank());
    if (it != g.end()) {
      color = int(gi);
      key = int(it - g.begin());
    }
  }
  return world.split(color, key, group_kind_name(kind));
}

}  // namespace

ParallelState::ParallelState(const ParallelConfig& cfg) {
  check_parallel_config(world_size_or_one(), cfg);  // before any communication
  world_comm = Communicator::world();
  world_rank = world_comm.rank();
  world_size = world_comm.size();
  tp_size = cfg.tp;
  cp_size = cfg.cp;
  pp_size = cfg.pp;
  vpp_size = cfg.vpp;
  dp_size = world_size / (tp_size * cp_size * pp_size);
  tp_rank = world_rank % tp_size;
  cp_rank = (world_rank / tp_size) % cp_size;
  dp_rank = (world_rank / (tp_size * cp_size)) % dp_size;
  pp_rank = world_rank / (tp_size * cp_size * dp_size);
  dp_cp_rank = cp_rank + cp_size * dp_rank;
  dp_cp_size = dp_size * cp_size;
  ep_size = cfg.ep;
  edp_size = tp_size * cp_size * dp_size / ep_size;
  const int in_stage = world_rank % (tp_size * cp_size * dp_size);
  ep_rank = in_stage % ep_size;
  edp_rank = in_stage / ep_size;
  pp_is_first_stage = pp_rank == 0;
  pp_is_last_stage = pp_rank == pp_size - 1;
  pp_next_rank = mesh_rank(tp_rank, cp_rank, dp_rank, (pp_rank + 1) % pp_size, tp_size, cp_size,
                           dp_size);
  pp_prev_rank = mesh_rank(tp_rank, cp_rank, dp_rank, (pp_rank + pp_size - 1) % pp_size, tp_size,
                           cp_size, dp_size);
  in_embedding_group = pp_is_first_stage || pp_is_last_stage;

  // Which node each rank is on (collective, like the splits below).
  for (const std::string& n : world_comm.processor_names()) {
    auto it = std::find(node_names.begin(), node_names.end(), n);
    node_of_rank.push_back(int(it - node_names.begin()));
    if (it == node_names.end()) node_names.push_back(n);
  }

  tp_comm = split(world_comm, GroupKind::kTp, tp_size, pp_size, cp_size, ep_size);
  cp_comm = split(world_comm, GroupKind::kCp, tp_size, pp_size, cp_size, ep_size);
  // At CP = 1 DP x CP is DP: gradients keep the "dp" communicator (and its name).
  dp_comm = split(world_comm, GroupKind::kDp, tp_size, pp_size, cp_size, ep_size);
  if (cp_size > 1)
    dp_cp_comm = split(world_comm, GroupKind::kDpCp, tp_size, pp_size, cp_size, ep_size);
  pp_comm = split(world_comm, GroupKind::kPp, tp_size, pp_size, cp_size, ep_size);
  mp_comm = split(world_comm, GroupKind::kModelParallel, tp_size, pp_size, cp_size, ep_size);
  embd_comm = split(world_comm, GroupKind::kEmbedding, tp_size, pp_size, cp_size, ep_size);
  ep_comm = split(world_comm, GroupKind::kEp, tp_size, pp_size, cp_size, ep_size);
  edp_comm = split(world_comm, GroupKind::kExpertDp, tp_size, pp_size, cp_size, ep_size);
  emp_comm = split(world_comm, GroupKind::kExpertMp, tp_size, pp_size, cp_size, ep_size);

  // The split must agree with the arithmetic above.
  MT_CHECK(tp_comm.rank() == tp_rank && dp_comm.rank() == dp_rank && pp_comm.rank() == pp_rank &&
               cp_comm.rank() == cp_rank && dp_cp().rank() == dp_cp_rank &&
               embd_comm.is_member() == in_embedding_group && ep_comm.rank() == ep_rank &&
               edp_comm.rank() == edp_rank,
           "ParallelState: communicator ranks disagree with the mesh (tp ", tp_comm.rank(), "/",
           tp_rank, ", cp ", cp_comm.rank(), "/", cp_rank, ", dp ", dp_comm.rank(), "/", dp_rank,
           ", pp ", pp_comm.rank(), "/", pp_rank, ")");
}

std::string ParallelState::layout() const {
  std::ostringstream os;
  os << "TP(" << tp_size << ")";
  if (cp_size > 1) os << "-CP(" << cp_size << ")";
  os << "-PP(" << pp_size << ")";
  if (vpp_size > 1) os << "-VPP(" << vpp_size << ")";
  os << "-DP(" << dp_size << ")";
  if (ep_size > 1) os << "-EP(" << ep_size << ")";
  return os.str();
}

void ParallelState::set_timeline(Timeline* timeline) {
  for (Communicator* c : {&tp_comm, &cp_comm, &dp_comm, &dp_cp_comm, &pp_comm, &mp_comm,
                          &embd_comm, &world_comm, &ep_comm, &edp_comm, &emp_comm})
    c->set_timeline(timeline);
}

const Communicator& ParallelState::comm(GroupKind kind) const {
  switch (kind) {
    case GroupKind::kTp:
      return tp_comm;
    case GroupKind::kCp:
      return cp_comm;
    case GroupKind::kDp:
      return dp_comm;
    case GroupKind::kDpCp:
      return dp_cp();
    case GroupKind::kPp:
      return pp_comm;
    case GroupKind::kModelParallel:
      return mp_comm;
    case GroupKind::kEmbedding:
      return embd_comm;
    case GroupKind::kWorld:
      return world_comm;
    case GroupKind::kEp:
      return ep_comm;
    case GroupKind::kExpertDp:
      return edp_comm;
    case GroupKind::kExpertMp:
      return emp_comm;
  }
  MT_FAIL("unknown group kind ", int(kind));
}

std::string node_crossing(const std::vector<std::vector<int>>& groups,
                          const std::vector<int>& node_of_rank) {
  size_t crossing = 0, widest = 1;
  for (const auto& g : groups) {
    std::vector<int> nodes;
    for (int r : g) nodes.push_back(node_of_rank.at(size_t(r)));
    std::sort(nodes.begin(), nodes.end());
    const size_t spans = size_t(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
    if (spans > 1) ++crossing;
    widest = std::max(widest, spans);
  }
  if (crossing == 0) return "inside nodes";
  return "crosses nodes: " + std::to_string(crossing) + " of " + std::to_string(groups.size()) +
         " groups span " + std::to_string(widest) + " nodes";
}

std::string ParallelState::describe_groups() const {
  std::ostringstream os;
  os << layout() << " world " << world_size << ", rank " << world_rank << " (tp " << tp_rank;
  if (cp_size > 1) os << ", cp " << cp_rank;
  os << ", dp " << dp_rank << ", pp " << pp_rank << ")\n";
  os << "nodes:";
  for (size_t n = 0; n < node_names.size(); ++n) {
    os << " " << node_names[n] << " [";
    bool first = true;
    for (int r = 0; r < world_size; ++r)
      if (node_of_rank[size_t(r)] == int(n)) os << (std::exchange(first, false) ? "" : ",") << r;
    os << "]";
  }
  os << "\n";
  for (GroupKind kind : {GroupKind::kTp, GroupKind::kCp, GroupKind::kDp, GroupKind::kDpCp,
                         GroupKind::kPp, GroupKind::kModelParallel, GroupKind::kEmbedding,
                         GroupKind::kWorld, GroupKind::kEp, GroupKind::kExpertDp}) {
    if (cp_size == 1 && (kind == GroupKind::kCp || kind == GroupKind::kDpCp)) continue;
    if (ep_size == 1 && (kind == GroupKind::kEp || kind == GroupKind::kExpertDp)) continue;
    const auto groups = group_ranks(kind, world_size, tp_size, pp_size, cp_size, ep_size);
    os << group_kind_name(kind) << ":";
    for (const auto& g : groups) {
      const bool mine = std::find(g.begin(), g.end(), world_rank) != g.end();
      os << " " << (mine ? "*" : "") << "[";
      for (size_t i = 0; i < g.size(); ++i) os << (i ? "," : "") << g[i];
      os << "]";
    }
    os << "  (" << node_crossing(groups, node_of_rank) << ")\n";
  }
  return os.str();
}

}  // namespace mt
