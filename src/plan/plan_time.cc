#include "plan/plan_time.h"

#include <algorithm>
#include <vector>

#include "comm/parallel_state.h"
#include "model/blocks/block_kinds.h"

namespace mt {

double all_reduce_seconds(double bytes, int64_t p, const LinkProfile& link) {
  if (p <= 1) return 0;
  const double q = double(p);
  const AlphaBeta ab = link.of(Collective::kAllReduce);
  return 2 * (q - 1) / q * bytes / ab.bandwidth_bytes_per_s + 2 * (q - 1) * ab.latency_s;
}

namespace {

double half_ring(double bytes, int64_t p, const AlphaBeta& ab) {
  if (p <= 1) return 0;
  const double q = double(p);
  return (q - 1) / q * bytes / ab.bandwidth_bytes_per_s + (q - 1) * ab.latency_s;
}

}  // namespace

double reduce_scatter_seconds(double bytes, int64_t p, const LinkProfile& link) {
  return half_ring(bytes, p, link.of(Collective::kReduceScatter));
}

double all_gather_seconds(double bytes, int64_t p, const LinkProfile& link) {
  return half_ring(bytes, p, link.of(Collective::kAllGather));
}

double p2p_seconds(double bytes, const LinkProfile& link) {
  const AlphaBeta ab = link.of(Collective::kP2p);
  return ab.latency_s + bytes / ab.bandwidth_bytes_per_s;
}

namespace {

// Most nodes one group of `kind` spans (ranks tp-cp-dp-pp, TP fastest, as
// group_ranks places them; devices_per_node ranks a node). Every group is the
// first one shifted by its first rank, and how many nodes a shifted group
// spans depends only on that rank modulo devices per node: so one group's
// offsets and each distinct residue are counted, not every group's ranks
// (a plan may have kMaxPlanRanks ranks and ask this for every TP x PP).
int max_nodes_spanned(GroupKind kind, const PlanLayout& l, const PlanCluster& c) {
  const int64_t size[kMeshAxes] = {l.tp, l.cp, l.dp, l.pp};
  bool in[kMeshAxes] = {};
  if (kind == GroupKind::kTp) in[kAxisTp] = true;
  if (kind == GroupKind::kCp || kind == GroupKind::kDpCp) in[kAxisCp] = true;
  if (kind == GroupKind::kDp || kind == GroupKind::kDpCp) in[kAxisDp] = true;
  if (kind == GroupKind::kPp) in[kAxisPp] = true;
  // Rank offsets of the axes in (or out of) the group, ascending.
  auto offsets = [&](bool want) {
    std::vector<int64_t> v = {0};
    int64_t stride = 1;
    for (int a = 0; a < kMeshAxes; ++a) {
      if (in[a] == want) {
        const size_t n = v.size();
        for (int64_t i = 1; i < size[a]; ++i)
          for (size_t j = 0; j < n; ++j) v.push_back(v[j] + i * stride);
      }
      stride *= size[a];
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  const std::vector<int64_t> members = offsets(true), firsts = offsets(false);
  const int64_t d = c.devices_per_node;
  std::vector<char> seen(size_t(std::min<int64_t>(d, l.world())), 0);
  int most = 1;
  for (int64_t first : firsts) {
    const int64_t residue = first % d;
    if (size_t(residue) < seen.size() && seen[size_t(residue)]) continue;
    if (size_t(residue) < seen.size()) seen[size_t(residue)] = 1;
    int nodes = 0;
    int64_t last = -1;
    for (int64_t o : members)  // ascending, so the nodes are too
      if ((residue + o) / d != last) ++nodes, last = (residue + o) / d;
    most = std::max(most, nodes);
  }
  return most;
}

}  // namespace

// Most nodes one EP group spans: EP consecutive ranks of a stage (the expert
// mesh puts EP fastest), starting at multiples of EP inside each stage.
int ep_nodes_spanned(const PlanLayout& l, const PlanCluster& c) {
  const int64_t d = c.devices_per_node, stage = l.tp * l.cp * l.dp;
  int most = 1;
  for (int64_t p = 0; p < std::min(l.pp, d); ++p)
    for (int64_t g = 0; g < std::min(stage / l.ep, d); ++g) {
      const int64_t first = p * stage + g * l.ep;
      most = std::max(most, int((first + l.ep - 1) / d - first / d + 1));
    }
  return most;
}

std::string NodeCrossing::describe() const {
  auto one = [](const char* name, int n) {
    return std::string(name) + (n > 1 ? " across " + std::to_string(n) + " nodes" : " inside nodes");
  };
  return one("TP", tp) + ", " + (cp > 0 ? one("CP", cp) + ", " : std::string()) + one("DP", dp) +
         ", " + one("PP", pp) + (ep > 0 ? ", " + one("EP (all-to-all)", ep) : std::string());
}

NodeCrossing node_crossing_of(const PlanLayout& l, const PlanCluster& c) {
  NodeCrossing x;
  x.tp = max_nodes_spanned(GroupKind::kTp, l, c);
  // Gradients (and ZeRO) reduce over DP x CP.
  x.dp = max_nodes_spanned(l.cp > 1 ? GroupKind::kDpCp : GroupKind::kDp, l, c);
  x.pp = max_nodes_spanned(GroupKind::kPp, l, c);
  if (l.cp > 1) x.cp = max_nodes_spanned(GroupKind::kCp, l, c);
  if (l.ep > 1) x.ep = ep_nodes_spanned(l, c);
  return x;
}

StepTime predict_step_time(const ModelConfig& mc, const PlanProblem& pb, const PlanLayout& l,
                           const PlanCluster& c, const NodeCrossing& x,
                           const ParamRegistry& first, const ParamRegistry& last) {
  const DeviceProfile& dev = c.device;
  const double peak = dev.peak_flops(l.bf16);
  auto gemm = [&](double flops) { return flops / (peak * dev.efficiency(flops, l.bf16)); };
  const double t = double(l.tp), s = double(mc.seq_length), b = double(l.micro_batch_size);
  // Context parallelism: each rank computes s/CP tokens of every sequence and
  // 1/CP of the causal attention (chunks i and 2CP-1-i balance it).
  const double cp = double(l.cp), sl = s / cp;
  const double n = sl * b, h = double(mc.hidden_size);
  const double nl = l.sequence_parallel ? n / t : n;  // residual-stream rows on a rank
  const double a = double(mc.num_attention_heads);
  const double f = double(mc.ffn_hidden_size), v = double(mc.padded_vocab_size);

  // One layer, one micro-batch, forward: GEMMs at their own efficiency, as
  // each layer's attention and MLP kinds list them (model/blocks/block_kinds.h),
  // averaged over the layers; the rows each sends over the expert-parallel
  // group (the MoE dispatch), summed.
  const PlanDims dims{n, nl, h, t, double(l.ep)};
  const double L = double(mc.num_layers);
  double linear = 0, d = 0;  // d: the attention core's features a head, averaged over the layers
  std::vector<double> gemms, exchange;  // exchange: each layer's elements over EP
  // Selective recompute of the MLP slot (--recompute-modules mlp / moe): its
  // GEMMs once more (averaged over the layers) and its dispatch's elements.
  const std::vector<std::string> modules = train_args_of(pb, l).recompute().modules;
  double mlp_redo = 0;
  std::vector<double> exchange_redo;
  // Partial recompute (moe_act, shared_experts, mla_up_proj): the GEMMs and
  // element-wise values each kind redoes under its layer's spec, averaged.
  double part_redo = 0, part_values = 0;
  std::vector<double> part_gemms;

  for (int64_t layer = 0; layer < mc.num_layers; ++layer) {
    LayerSpec spec = layer_spec(mc, layer);
    mark_recomputed(spec, modules);
    gemms.clear();
    double elements = 0;
    part_gemms.clear();
    with_kind<AttentionKinds>(spec.attention, [&](auto k) {
      decltype(k)::type::plan_gemms(mc, dims, gemms);
      d += decltype(k)::type::plan_core_head_dim(mc) / L;
      elements += decltype(k)::type::plan_exchange_elements(mc, dims);
      part_values += decltype(k)::type::plan_recompute(mc, dims, spec, part_gemms) / L;
    });
    with_kind<MlpKinds>(spec.mlp, [&](auto k) {
      part_values += decltype(k)::type::plan_recompute(mc, dims, spec, part_gemms) / L;
    });
    for (double flops : part_gemms) part_redo += gemm(flops) / L;
    with_kind<MlpKinds>(spec.mlp, [&](auto k) {
      const size_t first = gemms.size();
      decltype(k)::type::plan_gemms(mc, dims, gemms);
      const double mlp_elements = decltype(k)::type::plan_exchange_elements(mc, dims);
      elements += mlp_elements;
      if (!spec.recompute_mlp) return;
      for (size_t i = first; i < gemms.size(); ++i) mlp_redo += gemm(gemms[i]) / L;
      if (mlp_elements > 0) exchange_redo.push_back(mlp_elements);
    });
    if (elements > 0) exchange.push_back(elements);
    for (double flops : gemms) linear += gemm(flops) / L;
  }
  // The causal attention core: two products counted half forward, 2.5 times
  // that backward (the probabilities are re-derived), at the core's own rate.
  const double attn_fwd_flops = 2 * b * (a / t) * s * s * d / cp;
  const bool dropout = mc.attention_dropout > 0;
  const double core_fwd = dev.attention_seconds(attn_fwd_flops, sl, l.bf16, dropout);
  const double core_bwd = dev.attention_seconds(2.5 * attn_fwd_flops, sl, l.bf16, dropout);
  // Element-wise passes (norms, bias, dropout, residual adds, GELU/SwiGLU)
  // read and write each value about this many times per forward.
  const double e = l.bf16 ? 2.0 : 4.0;
  const double elementwise = e * (12 * nl * h + 4 * n * f / t) / dev.memory_bandwidth_bytes_per_s;
  const double layer_fwd = linear + core_fwd + elementwise;
  // Backward: two GEMMs per linear layer (input and weight gradients).
  const double layer_bwd = 2 * linear + core_bwd + 2 * elementwise;
  const double layers = double(mc.num_layers) / double(l.pp);
  const bool full = l.recompute == "full";
  // The loss head on the last stage: logits GEMM (and its two backward ones)
  // plus the softmax-cross-entropy passes over (s, b, v/t).
  const double head =
      3 * gemm(2 * n * h * v / t) + 4 * 4 * n * v / t / dev.memory_bandwidth_bytes_per_s;
  // --recompute-modules layernorm: both norms once more (each reads and writes nl·h).
  const bool norms_redo =
      std::find(modules.begin(), modules.end(), "layernorm") != modules.end();
  const double norm_redo = norms_redo ? e * 4 * nl * h / dev.memory_bandwidth_bytes_per_s : 0.0;
  const double part = part_redo + e * part_values / dev.memory_bandwidth_bytes_per_s;
  const double redo = full ? layer_fwd : mlp_redo + norm_redo + part;  // a layer's recomputed forward
  const double first_mb = layers * (layer_fwd + layer_bwd + redo);
  // Multi-token prediction (--mtp-num-layers) on the last stage: each depth
  // one more layer (an average one here; its activations are kept), its
  // eh_proj (2h -> h/t; forward and two backward GEMMs) and one more loss head.
  const double mtp = double(mc.mtp_num_layers) *
                     (layer_fwd + layer_bwd + 3 * gemm(2 * n * 2 * h * h / t) + head);
  const double last_mb = first_mb + head + mtp;
  const double mb = std::max(first_mb, last_mb);

  // TP per micro-batch and layer: forward two all-reduces (with SP an
  // all-gather before each column-parallel GEMM and a reduce-scatter after
  // each row-parallel one), backward the same, a recomputed forward two more;
  // the vocabulary-parallel embedding's and the loss's (max, sum, target).
  const LinkProfile& tp_link = x.tp > 1 ? dev.inter_node : dev.intra_node;
  const double wire = l.bf16 && dev.bf16_activations_on_wire ? 2.0 : 4.0;
  double tp_mb = 0;
  if (l.tp > 1) {
    const double act = n * h * wire;
    const double pair = l.sequence_parallel ? reduce_scatter_seconds(act, l.tp, tp_link) +
                                                  all_gather_seconds(act, l.tp, tp_link)
                                            : all_reduce_seconds(act, l.tp, tp_link);
    tp_mb = layers * (4 + (full ? 2 : 0)) * pair + pair +
            3 * all_reduce_seconds(n * 4, l.tp, tp_link);
  }
  // PP per micro-batch: each chunk receives an activation and a gradient.
  const LinkProfile& pp_link = x.pp > 1 ? dev.inter_node : dev.intra_node;
  const double pp_mb = l.pp > 1 ? 2 * double(l.vp) * p2p_seconds(nl * h * wire, pp_link) : 0;

  // CP per micro-batch and layer: forward CP-1 K|V messages, backward CP-1
  // K|V and CP dK|dV (fp32), each 2·b·(g/t)·(s/CP)·d elements; a recomputed
  // forward CP-1 more. CP ranks sit next to TP in the rank order (tp-cp-dp-pp).
  const LinkProfile& cp_link = x.cp > 1 ? dev.inter_node : dev.intra_node;
  double cp_mb = 0;
  if (l.cp > 1) {
    const double msg = 2 * b * double(mc.query_groups()) / t * sl * d;
    const double kv = p2p_seconds(msg * (l.bf16 ? 2.0 : 4.0), cp_link);
    cp_mb = layers * ((2 + (full ? 1 : 0)) * (cp - 1) * kv + cp * p2p_seconds(msg * 4, cp_link));
  }

  // EP per micro-batch and MoE layer: forward the dispatch and the combine
  // (each rank's n·k routed rows, (EP-1)/EP of them leave the rank), backward
  // the same two, a recomputed forward two more; as an all-gather's traffic.
  const LinkProfile& ep_link = x.ep > 1 ? dev.inter_node : dev.intra_node;
  double ep_mb = 0;
  if (l.ep > 1)
    for (double elements : exchange)
      ep_mb += (4 + (full ? 2 : 0)) / double(l.pp) *
               all_gather_seconds(elements * wire, l.ep, ep_link);
  if (l.ep > 1)
    for (double elements : exchange_redo)
      ep_mb += 2 / double(l.pp) * all_gather_seconds(elements * wire, l.ep, ep_link);

  const double m = double(pb.global_batch_size) / (b * double(l.dp));
  StepTime st;
  st.ep_comm = m * ep_mb;
  st.cp_comm = m * cp_mb;
  st.compute = m * mb;
  st.recompute = m * layers * redo;
  st.tp_comm = m * tp_mb;
  st.pp_comm = m * pp_mb;
  // 1F1B with stages of unequal time: the busiest stage runs its m
  // micro-batches back to back; before its first and after its last, the
  // other stages' forward and backward of one micro-batch each (fill and
  // drain). Equal stages give Megatron's (P − 1)/(v·m) of the compute.
  const double comm_mb = tp_mb + pp_mb + cp_mb + ep_mb;
  const double stages_sum = double(l.pp - 1) * first_mb + last_mb + double(l.pp) * comm_mb;
  st.bubble = l.pp > 1 ? (stages_sum - (mb + comm_mb)) / double(l.vp) : 0;

  // Once per step: DP gradients (fp32) and, with ZeRO-1, the parameters'
  // all-gather, dense ones over DP x CP, experts over expert-DP ((TP x CP x
  // DP) / EP ranks); the tied embedding's gradient between first and last stage.
  const LinkProfile& dp_link = x.dp > 1 ? dev.inter_node : dev.intra_node;
  const int64_t dp_cp = l.dp * l.cp;  // gradients and ZeRO shards over DP x CP
  const int64_t edp = l.tp * l.cp * l.dp / l.ep;
  // Megatron-FSDP reduce-scatters the gradients in every micro-batch
  // (optim_grads), and optim_grads_params gathers every layer's weights twice
  // per micro-batch (forward, backward) instead of once after the step; the
  // model counts both as exposed (blocking reductions; the prefetch's overlap
  // is not modelled).
  auto grad_sync = [&](double floats, int64_t ranks) {
    if (ranks == 1 || floats == 0) return 0.0;
    const double rs = reduce_scatter_seconds(floats * 4, ranks, dp_link);
    const double ag = all_gather_seconds(floats * (l.bf16 ? 2 : 4), ranks, dp_link);
    if (l.sharding == "optim_grads") return m * rs + ag;
    if (l.sharding == "optim_grads_params") return m * rs + 2 * m * ag;
    return l.distributed_optimizer ? rs + ag : all_reduce_seconds(floats * 4, ranks, dp_link);
  };
  // AdamW reads grad, m, v, main weight and writes m, v, main weight and the
  // model's copy: ~40 bytes per parameter it owns (fp32: 32).
  const double per_param = (l.bf16 ? 40.0 : 32.0) / dev.memory_bandwidth_bytes_per_s;
  for (const ParamRegistry* reg : {&first, &last}) {
    const double total = double(reg->total_floats());
    const double expert = total - double(reg->group_begin(GradGroup::kExpertDataParallel));
    const double dense = total - expert;
    st.dp_comm = std::max(st.dp_comm, grad_sync(dense, dp_cp) + grad_sync(expert, edp));
    const double owned =
        l.distributed_optimizer ? dense / double(dp_cp) + expert / double(edp) : total;
    st.optimizer = std::max(st.optimizer, owned * per_param);
  }
  if (l.pp > 1 && mc.tied_output())
    st.dp_comm += all_reduce_seconds(v / t * h * 4, 2, pp_link);

  // More ranks on a node than cores (one thread each): the ranks take turns,
  // so the node's summed compute over its cores bounds the step. A node holds
  // whole pipelines unless PP crosses nodes (then, at worst, last stages only).
  const double ranks = double(c.devices_per_node), cores = double(dev.cores_per_node);
  if (dev.cores_per_node > 0 && ranks > cores) {
    const double per_rank =
        x.pp > 1 ? m * mb : m * (double(l.pp - 1) * first_mb + last_mb) / double(l.pp);
    const double node = ranks * (per_rank + st.optimizer) / cores + st.dp_comm;
    st.shared = std::max(0.0, node - st.total());
  }
  return st;
}

}  // namespace mt
