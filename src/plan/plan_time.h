// `megatron plan`'s step time of one layout on one cluster:
//   compute   per micro-batch on each pipeline stage: every GEMM at the
//             device's peak x its efficiency for that GEMM's size (bf16 on its
//             own curve), the causal attention core at its own measured rate
//             (by sequence length, precision, dropout), element-wise work at
//             the memory bandwidth; full recompute adds one more forward
//   TP        per layer 4 all-reduces, or with SP 4 reduce-scatters + 4
//             all-gathers (each priced by its own α–β: their MPI algorithms
//             differ), the embedding's and the loss's, per micro-batch
//   PP        the p2p activation and gradient of each model chunk, per micro-batch
//   bubble    1F1B with unequal stages (the last holds the logits): the busiest
//             stage runs m micro-batches, the others' one micro-batch each is
//             the fill and drain, ÷ v when interleaved
//   DP        gradient all-reduce, or reduce-scatter + all-gather of the
//             parameters with the distributed optimizer, and the tied-embedding
//             all-reduce between the first and last stage; once per step
//   optimizer the AdamW step over the rank's (shard of the) parameters
//   shared    CPUs (profile cores_per_node): with more ranks on a node than
//             cores, the node's summed compute ÷ its cores bounds the step
// Collectives are rings with an α–β cost on the slowest link the group uses:
// inside a node, or between nodes when its ranks span several (ranks placed
// tp-dp-pp, TP fastest, as Megatron places them). Nothing is assumed to
// overlap: this program's collectives and receives are blocking.
#pragma once
#include <cstdint>
#include <string>

#include "plan/device_profile.h"
#include "plan/plan_layout.h"

namespace mt {

struct PlanCluster {
  int64_t nodes = 1, devices_per_node = 1;
  DeviceProfile device;
  int64_t world() const { return nodes * devices_per_node; }  // checked: plan_world_size
};

// Which groups span more than one node, and the most nodes one group spans.
struct NodeCrossing {
  int tp = 1, dp = 1, pp = 1;  // most nodes one group of that kind spans
  int cp = 0;                  // the same for CP; 0: no CP group (CP = 1)
  int ep = 0;                  // the same for EP (MoE all-to-all); 0: no EP group (EP = 1)
  std::string describe() const;  // "TP inside nodes, CP inside nodes, DP across 2 nodes, ..."
};
NodeCrossing node_crossing_of(const PlanLayout& l, const PlanCluster& c);

struct StepTime {
  double compute = 0;    // m micro-batches on the busiest stage (recompute included)
  double recompute = 0;  // of which the recomputed forward (full; selective mlp / moe's GEMMs)
  double tp_comm = 0, pp_comm = 0;  // exposed, per step (m micro-batches)
  double cp_comm = 0;    // the ring attention's K|V and dK|dV steps, counted as if not hidden
  double ep_comm = 0;    // MoE token dispatch and combine over EP (all-to-all), exposed
  double bubble = 0;     // (P − 1)/v micro-batch times, communication included
  double dp_comm = 0, optimizer = 0;
  double shared = 0;     // more ranks than cores: what the node's summed work adds
  double total() const {
    return compute + tp_comm + pp_comm + cp_comm + ep_comm + bubble + dp_comm + optimizer +
           shared;
  }
};

// `model` finalized for the layout's TP (padded vocabulary); `x` its
// node_crossing_of (computed once per TP and PP by the caller); `first`,
// `last`: the first and last stage's parameters on a rank (stage_registry):
// dense gradients go over DP x CP, an MoE model's experts over expert-DP.
StepTime predict_step_time(const ModelConfig& model, const PlanProblem& pb, const PlanLayout& l,
                           const PlanCluster& c, const NodeCrossing& x,
                           const ParamRegistry& first, const ParamRegistry& last);

// α–β ring costs of `bytes` (the whole buffer) over `p` ranks, each with the
// link's pair for that collective.
double all_reduce_seconds(double bytes, int64_t p, const LinkProfile& link);
double reduce_scatter_seconds(double bytes, int64_t p, const LinkProfile& link);
double all_gather_seconds(double bytes, int64_t p, const LinkProfile& link);
double p2p_seconds(double bytes, const LinkProfile& link);

}  // namespace mt
