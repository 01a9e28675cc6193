#include "model/blocks/moe_block.h"

#include <algorithm>
#include <cmath>

#include "backend/device.h"
#include "core/divide.h"
#include "core/error.h"
#include "kernels/attention_ring.h"
#include "kernels/matmul.h"
#include "kernels/moe_permute.h"
#include "kernels/moe_router.h"
#include "kernels/swiglu.h"
#include "model/blocks/block_kinds.h"
#include "model/blocks/moe_dispatch.h"
#include "model/blocks/moe_experts.h"

namespace mt {

namespace {

// The shapes the shared expert's dense MLP block runs with: the layer's, with
// its own ffn sizes.
GptShapes shared_shapes(const GptShapes& sh) {
  GptShapes s = sh;
  s.f = moe_of(sh).shared_f;
  s.f_in = moe_of(sh).shared_f_in;
  return s;
}

}  // namespace

const MoeShapes& moe_of(const GptShapes& sh) { return shapes_of<MoeMlp>(sh.kinds.get()); }

MoeShapes moe_shapes(const ModelConfig& c, const StageLayout& st, const GptShapes& sh,
                     const Communicator* ep) {
  MoeShapes m;
  m.ep = ep;
  m.ranks = st.ep_size;
  m.rank = st.ep_rank;
  MT_CHECK(ep == nullptr || (ep->size() == st.ep_size && ep->rank() == st.ep_rank),
           "EP group of size ", ep ? ep->size() : 1, " for a parameter list built for EP ",
           st.ep_size, " (internal error)");
  m.experts = c.num_experts;
  m.local = divide(c.num_experts, st.ep_size, "--num-experts by --expert-model-parallel-size");
  m.first = m.local * st.ep_rank;
  m.topk = c.moe_router_topk;
  m.f = c.moe_ffn();
  m.f_in = c.fc1_rows(m.f);
  m.routing.score = c.moe_router_score_function == "sigmoid" ? MoeScoreFunction::kSigmoid
                                                              : MoeScoreFunction::kSoftmax;
  m.routing.pre_softmax = c.moe_router_pre_softmax;
  m.routing.num_groups = c.moe_router_num_groups;
  m.routing.group_topk = c.moe_router_group_topk;
  if (c.moe_router_topk_scaling_factor > 0) m.routing.scaling = c.moe_router_topk_scaling_factor;
  m.limited = c.moe_router_group_topk > 0 || c.moe_router_enable_expert_bias;
  m.router_fp32 = c.moe_router_dtype == "fp32";
  const std::string& lb = c.moe_router_load_balancing_type;
  m.aux_seqs = lb == "aux_loss" ? 1 : lb == "seq_aux_loss" ? sh.b : 0;
  m.aux_coeff = c.moe_aux_loss_coeff;
  m.z_coeff = c.moe_z_loss_coeff;
  m.capacity_factor = c.moe_expert_capacity_factor;
  m.drop_by_position = c.moe_token_drop_policy == "position";
  m.pad_to_capacity = c.moe_pad_expert_input_to_capacity;
  m.alltoall = c.moe_token_dispatcher_type == "alltoall";
  m.grouped = c.moe_grouped_gemm;
  if (c.moe_shared_expert_intermediate_size > 0) {
    m.shared_f = divide(c.moe_shared_expert_intermediate_size, st.tp_size,
                        "--moe-shared-expert-intermediate-size by TP");
    m.shared_f_in = c.fc1_rows(m.shared_f);
  }
  if (m.capacity_factor > 0)
    m.capacity = moe_expert_capacity(sh.local_tokens(), m.experts, m.topk, m.capacity_factor);
  m.max_rows = moe_max_rows(m, sh.local_tokens());
  return m;
}

int64_t moe_max_rows(const MoeShapes& m, int64_t n) {
  // The most pairs one rank's experts can get: every token of the EP group
  // choosing min(k, local) of them, or each expert full to its capacity.
  int64_t pairs = m.ranks * n * std::min(m.topk, m.local);
  int64_t per_expert = m.ranks * n;  // a token visits an expert at most once
  if (m.capacity_factor > 0) {
    const int64_t cap = moe_expert_capacity(n, m.experts, m.topk, m.capacity_factor);
    pairs = std::min(pairs, m.ranks * m.local * cap);
    per_expert = std::min(per_expert, m.ranks * cap);
  }
  // Grouped: every expert padded to the busiest one's rows.
  if (m.grouped) pairs = m.local * per_expert;
  return pairs + pairs / 8 + 8 * m.local;  // each expert's rows padded (moe_padded_rows)
}

void moe_param_specs(ParamRegistry& reg, const std::string& prefix) {
  const ModelConfig& c = reg.config();
  const StageLayout& st = reg.stage();
  const int64_t h = c.hidden_size, f = c.moe_ffn();
  const float std = c.init_method_std, out_std = output_init_std(c);
  reg.add(prefix + "router.weight", c.num_experts, h, 2, -1, Init::kNormal, std, true);
  if (c.moe_router_enable_expert_bias)
    reg.add(prefix + "router.expert_bias", c.num_experts, 1, 1, -1, Init::kZeros, 0, false)
        .expert_bias = true;
  const int64_t local =
      divide(c.num_experts, st.ep_size, "--num-experts by --expert-model-parallel-size");
  for (int64_t e = st.ep_rank * local; e < (st.ep_rank + 1) * local; ++e) {
    const std::string p = prefix + "experts.local_experts." + std::to_string(e) + ".";
    auto expert = [&](ParamSpec& s) { s.grad_group = GradGroup::kExpertDataParallel; };
    expert(reg.add(p + "linear_fc1.weight", c.fc1_rows(f), h, 2, -1, Init::kNormal, std, true));
    if (c.add_bias())
      expert(reg.add(p + "linear_fc1.bias", c.fc1_rows(f), 1, 1, -1, Init::kZeros, 0, false));
    expert(reg.add(p + "linear_fc2.weight", h, f, 2, -1, Init::kNormal, out_std, true));
    if (c.add_bias()) expert(reg.add(p + "linear_fc2.bias", h, 1, 1, -1, Init::kZeros, 0, false));
  }
  if (c.moe_shared_expert_intermediate_size > 0)
    mlp_param_specs(reg, prefix + "shared_experts.", c.moe_shared_expert_intermediate_size);
}

namespace {

// Sizes of the record's and workspace's arrays, in carve order.
struct MoeSizes {
  int64_t n, n_full, h, E, k, seqs, ep, rows, f, f_in, x_rows, vals, shared_f, shared_f_in;
  bool bf16, swiglu, limited;
  MoeKeeps keep = {};                 // the record's act and shared expert
  MoeKeeps recompute = {false, false};  // the workspace's buffers for them
  MoeSizes(const MoeShapes& m, int64_t n_, int64_t n_full_, int64_t h_, bool bf16_, bool swiglu_)
      : n(n_),
        n_full(n_full_),
        h(h_),
        E(m.experts),
        k(m.topk),
        seqs(std::max<int64_t>(1, m.aux_seqs)),
        ep(m.ep_size()),
        rows(moe_max_rows(m, n_)),
        f(m.f),
        f_in(m.f_in),
        x_rows(std::max({n * k, rows, ep * n})),
        vals(std::max(2 * ep * n * k, rows)),
        shared_f(m.shared_f),
        shared_f_in(m.shared_f_in),
        bf16(bf16_),
        swiglu(swiglu_),
        limited(m.limited) {}
  explicit MoeSizes(const GptShapes& sh)
      : MoeSizes(moe_of(sh), sh.local_tokens(), sh.tokens(), sh.h, sh.cm.math == MathMode::kBF16,
                 sh.swiglu) {}
};

WriteView alloc_values(Arena& arena, const MoeSizes& z, int64_t n) {
  if (z.bf16) return static_cast<uint16_t*>(arena.alloc(DType::kBF16, {n}).data);
  return arena.alloc_f32(n);
}

int64_t* alloc_i64(Arena& arena, int64_t n) {
  return reinterpret_cast<int64_t*>(arena.alloc_f32(2 * n));  // 8-byte slots (64-byte aligned)
}

// The shared expert's record: as carve_mlp_record with its sizes.
MlpRecord carve_shared(Arena& arena, const MoeSizes& z) {
  MlpRecord r;
  r.fc1 = alloc_values(arena, z, z.n_full * z.shared_f_in);
  r.act = alloc_values(arena, z, z.n_full * z.shared_f);
  return r;
}

MoeRecord carve_record(Arena& arena, const MoeSizes& z) {
  MoeRecord r;
  r.logits = arena.alloc_f32(z.n * z.E);
  r.scores = arena.alloc_f32(z.n * z.E);
  r.expert = reinterpret_cast<int32_t*>(arena.alloc_f32(z.n * z.k));
  r.prob = arena.alloc_f32(z.n * z.k);
  r.kept = reinterpret_cast<uint8_t*>(arena.alloc_f32((z.n * z.k + 3) / 4));
  r.gate = arena.alloc_f32(z.n * z.k);
  r.counts = reinterpret_cast<double*>(alloc_i64(arena, z.seqs * z.E));
  r.perm = alloc_i64(arena, z.n * z.k);
  r.perm_tok = alloc_i64(arena, z.n * z.k);
  r.counts_all = alloc_i64(arena, z.ep * z.E);
  r.src = alloc_i64(arena, z.rows);
  r.inv = alloc_i64(arena, z.rows);
  r.pair = alloc_i64(arena, z.rows);
  r.meta = alloc_i64(arena, 3);
  r.xin = alloc_values(arena, z, z.rows * z.h);
  r.gate_rows = arena.alloc_f32(z.rows);
  r.fc1 = alloc_values(arena, z, z.rows * z.f_in);
  if (z.keep.act) r.act = alloc_values(arena, z, z.rows * z.f);
  r.y = alloc_values(arena, z, z.rows * z.h);
  if (z.shared_f > 0 && z.keep.shared) r.shared = carve_shared(arena, z);
  r.recompute_act = !z.keep.act;
  r.recompute_shared = z.shared_f > 0 && !z.keep.shared;
  return r;
}

MoeWorkspace carve_workspace(Arena& arena, const MoeSizes& z) {
  MoeWorkspace w;
  w.host = std::make_shared<MoeHostScratch>();
  MoeHostScratch& hs = *w.host;
  hs.send_rows.assign(size_t(z.ep), 0);
  hs.recv_rows.assign(size_t(z.ep), 0);
  for (ChunkSplit* c : {&hs.send_split, &hs.recv_split}) {
    c->counts.assign(size_t(z.ep), 0);
    c->displs.assign(size_t(z.ep), 0);
  }
  hs.start.assign(size_t(std::max(z.ep * z.E, z.E / z.ep + 1)), 0);
  hs.next.assign(size_t(z.E), 0);
  hs.order.assign(size_t(z.ep * z.n * z.k), 0);
  hs.capacity.assign(size_t(moe_capacity_scratch(z.n, z.E, z.k)), 0);
  w.x32 = arena.alloc_f32(z.n * z.h);
  w.w32 = arena.alloc_f32(z.E * z.h);
  w.dlogits = arena.alloc_f32(z.n * z.E);
  w.dprob = arena.alloc_f32(z.n * z.k);
  if (z.limited) {
    w.aux_expert = reinterpret_cast<int32_t*>(arena.alloc_f32(z.n * z.k));
    w.load = reinterpret_cast<double*>(alloc_i64(arena, z.E));
  }
  w.bias32 = arena.alloc_f32(z.E);
  w.xa = arena.alloc_f32(z.x_rows * z.h);
  w.xb = arena.alloc_f32(z.x_rows * z.h);
  w.va = arena.alloc_f32(z.vals);
  w.vb = arena.alloc_f32(z.vals);
  w.rows_a = arena.alloc_f32(z.rows * z.h);
  w.rows_b = arena.alloc_f32(z.rows * z.h);
  w.dgate_rows = arena.alloc_f32(z.rows);
  w.dact = arena.alloc_f32(z.rows * z.f);
  if (z.swiglu) w.dfc_in = arena.alloc_f32(z.rows * z.f_in);
  if (z.shared_f > 0) {  // as carve_mlp_workspace with the shared expert's sizes
    w.shared.dfc = arena.alloc_f32(z.n_full * z.shared_f);
    if (z.swiglu) w.shared.dfc_in = arena.alloc_f32(z.n_full * z.shared_f_in);
    w.shared_io = arena.alloc_f32(z.n * z.h);
  }
  if (z.recompute.act) w.act = alloc_values(arena, z, z.rows * z.f);
  if (z.shared_f > 0 && z.recompute.shared) w.shared_rec = carve_shared(arena, z);
  return w;
}

// What a layer of `spec` keeps, and which buffers the workspace of a stage
// whose layers take `specs` holds (a layer of the MoE kind recomputing them).
MoeKeeps moe_keeps(const LayerSpec& spec) { return {!spec.recompute_act, !spec.recompute_shared}; }
MoeKeeps moe_recomputes(const std::vector<LayerSpec>& specs) {
  constexpr size_t kMoe = MlpKinds::index_of<MoeMlp>();
  return {specs_recompute(specs, &LayerSpec::mlp, kMoe, &LayerSpec::recompute_act),
          specs_recompute(specs, &LayerSpec::mlp, kMoe, &LayerSpec::recompute_shared)};
}

}  // namespace

MoeRecord carve_moe_record(Arena& arena, const GptShapes& sh, const LayerSpec& spec) {
  MoeSizes z(sh);
  z.keep = moe_keeps(spec);
  return carve_record(arena, z);
}

MoeWorkspace carve_moe_workspace(Arena& arena, const GptShapes& sh) {
  MoeSizes z(sh);
  z.recompute = moe_recomputes(sh.layer_specs);
  return carve_workspace(arena, z);
}

double moe_record_bytes(const MoeShapes& m, int64_t n, int64_t n_full, int64_t h, bool bf16,
                        bool swiglu, MoeKeeps keep) {
  Arena plan;
  MoeSizes z(m, n, n_full, h, bf16, swiglu);
  z.keep = keep;
  carve_record(plan, z);
  return double(plan.used());
}

double moe_workspace_bytes(const MoeShapes& m, int64_t n, int64_t n_full, int64_t h, bool bf16,
                           bool swiglu, MoeKeeps recompute) {
  Arena plan;
  MoeSizes z(m, n, n_full, h, bf16, swiglu);
  z.recompute = recompute;
  carve_workspace(plan, z);
  return double(plan.used());
}

double moe_flops(const ModelConfig& c, double tokens) {
  const double h = double(c.hidden_size), f = double(c.moe_ffn());
  const double expert = 12.0 * tokens * h * f * (c.swiglu ? 1.5 : 1.0);
  double shared = 0;
  if (c.moe_shared_expert_intermediate_size > 0)
    shared =
        12.0 * tokens * h * double(c.moe_shared_expert_intermediate_size) * (c.swiglu ? 1.5 : 1.0);
  return expert * double(c.moe_router_topk) + shared;  // (Megatron counts no router)
}

namespace {

// The router's fp32 input (n, h) and weight (E, h): the activations and
// weights themselves in fp32 runs, widened copies in bf16 runs.
const float* router_input(const MoeRecord& rec, MoeWorkspace& ws, const GptShapes& sh) {
  if (!rec.in.bf16) return rec.in.f32;
  convert(ws.x32, rec.in, sh.local_tokens() * sh.h);
  return ws.x32;
}
const float* router_weight(ReadView w, MoeWorkspace& ws, const GptShapes& sh) {
  if (!w.bf16) return w.f32;
  convert(ws.w32, w, moe_of(sh).experts * sh.h);
  return ws.w32;
}

// The dtype the router's logits and probabilities are held in: fp32 with
// --moe-router-dtype fp32, else the run's (Megatron's router.py gating).
MathMode router_math(const GptShapes& sh) {
  return moe_of(sh).router_fp32 ? MathMode::kF32 : sh.cm.math;
}

// Sum of `x` (n values) over the tokens of one micro-batch: this rank's TP
// slab and CP chunks.
void sum_over_sequence(double* x, int64_t n, const GptShapes& sh) {
  if (sh.tp.size() > 1) sh.tp.tp->all_reduce_sum(x, n);
  if (sh.cp.size() > 1) sh.cp.cp->all_reduce_sum(x, n);
}

// Tokens of one micro-batch over the group that shares the aux loss (T).
double group_tokens(const GptShapes& sh) {
  return double(sh.local_tokens()) * double(sh.tp.size()) * double(sh.cp.size());
}

// The load-balancing loss's scale (its coefficient left out): E / (k·T²), or
// per sequence E / (k·S²·b) with S = T / b, the group's rows of a sequence
// (Megatron's _apply_seq_aux_loss: total_num_tokens of the (s, b·E) view).
double aux_scale(const GptShapes& sh) {
  const MoeShapes& m = moe_of(sh);
  const double base = double(m.experts) / double(m.topk), T = group_tokens(sh);
  if (m.aux_seqs <= 1) return base / (T * T);
  const double S = T / double(sh.b);
  return base / (S * S * double(sh.b));
}

// The routing with this layer's expert bias (fp32 in `tmp`, E floats), if any.
MoeRouting routing_with_bias(const MoeShapes& m, ReadView bias, float* tmp) {
  MoeRouting r = m.routing;
  if (bias.f32 == nullptr && bias.bf16 == nullptr) return r;
  convert(tmp, bias, m.experts);
  r.bias = tmp;
  return r;
}

// The busiest expert's share of `counts` (seqs, E) summed over the sequences.
double busiest_share(const double* counts, int64_t E, int64_t seqs) {
  double total = 0, most = 0;
  for (int64_t e = 0; e < E; ++e) {
    double c = 0;
    for (int64_t s = 0; s < seqs; ++s) c += counts[s * E + e];
    total += c;
    most = std::max(most, c);
  }
  return total > 0 ? most / total : 0;
}

}  // namespace

void moe_block_forward(float* out, MoeRecord& rec, const MoeParams<ReadView>& w, MoeWorkspace& ws,
                       const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const MoeShapes& m = moe_of(sh);
  const int64_t n = sh.local_tokens(), E = m.experts, k = m.topk;
  // Router: logits (fp32 sums of the bf16 operands in a bf16 run, then held
  // in the router's dtype), top-k with the softmax in fp32, capacity; the
  // gates are the probabilities in the router's dtype (rec.prob stays the
  // fp32 softmax, which backward differentiates, as autograd does).
  linear_forward(rec.logits, router_input(rec, ws, sh), router_weight(w.router_w, ws, sh), nullptr,
                 n, sh.h, E);
  moe_router_round(rec.logits, n * E, router_math(sh));
  const MoeRouting routing = routing_with_bias(m, w.expert_bias, ws.bias32);
  moe_topk_forward(rec.expert, rec.prob, rec.scores, rec.logits, n, E, k, routing);
  const int64_t capacity = m.capacity_factor > 0 ? m.capacity : -1;
  moe_apply_capacity(rec.kept, rec.expert, rec.prob, n, E, k, capacity, m.drop_by_position,
                     ws.host->capacity.data());
  for (int64_t p = 0; p < n * k; ++p) rec.gate[p] = rec.kept[p] ? rec.prob[p] : 0.f;
  moe_router_round(rec.gate, n * k, router_math(sh));
  // The choices' counts over the micro-batch's tokens for the load-balancing
  // loss: with groups or a bias, those of the plain top-k, as Megatron's
  // compute_routing_scores_for_aux_loss counts them.
  const int64_t seqs = std::max<int64_t>(1, m.aux_seqs);
  const int32_t* aux_choice = rec.expert;
  if (m.limited) {
    moe_topk_plain(ws.aux_expert, rec.logits, n, E, k);
    aux_choice = ws.aux_expert;
  }
  moe_expert_counts(rec.counts, aux_choice, n, k, E, seqs);
  sum_over_sequence(rec.counts, seqs * E, sh);
  if (call.ctx.training && call.ctx.moe_stats != nullptr) {
    MoeStats& st = *call.ctx.moe_stats;
    if (m.aux_seqs > 0)
      st.load_balancing_loss +=
          moe_aux_loss(rec.scores, rec.counts, n, E, seqs, aux_scale(sh), m.routing.score);
    if (m.z_coeff > 0) st.z_loss += moe_z_loss(rec.logits, n, E, 1.0 / group_tokens(sh));
    // The log's busiest expert: of the choices made.
    const double* load = rec.counts;
    if (m.limited) {
      moe_expert_counts(ws.load, rec.expert, n, k, E, 1);
      sum_over_sequence(ws.load, E, sh);
      load = ws.load;
    }
    st.busiest_share = std::max(st.busiest_share, busiest_share(load, E, m.limited ? 1 : seqs));
    ++st.layer_passes;
    // The expert bias's load: the kept pairs (Megatron's routing_map after
    // the capacity), this rank's tokens; the trainer sums them over the ranks.
    // A recomputed forward (PassContext::recomputing) counts nothing.
    if (!st.expert_tokens.empty()) {
      double* tokens = st.expert_tokens.data() + call.layer * E;
      for (int64_t p = 0; p < n * k; ++p)
        if (rec.kept[p]) tokens[rec.expert[p]] += 1;
    }
  }
  // Dispatch, experts, combine.
  moe_dispatch_forward(rec, ws, sh);
  experts_forward(rec, rec.recompute_act ? ws.act : rec.act, w, sh);
  const int64_t rows = rec.meta[2];
  scale_rows(ws.rows_a, rec.y, rec.gate_rows, rows, sh.h);
  moe_rows_to_tokens(out, ws.rows_a, rec, ws, sh);
  if (m.shared_f > 0) {  // out += the shared expert's output (a dense MLP over TP)
    const GptShapes ssh = shared_shapes(sh);
    const BlockCall scall{ssh, call.ctx, call.layer, call.sample0, call.full_a, call.full_b};
    MlpRecord& shared = rec.recompute_shared ? ws.shared_rec : rec.shared;
    shared.in = rec.in;
    mlp_block_forward(ws.shared_io, shared, w.shared, scall);
    add_inplace(out, ws.shared_io, n * sh.h);
  }
}

void moe_block_backward(float* din, const MoeParams<float*>& g, const float* dout,
                        const MoeRecord& rec, MoeWorkspace& ws, const MoeParams<ReadView>& w,
                        const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const MoeShapes& m = moe_of(sh);
  const int64_t n = sh.local_tokens(), E = m.experts, k = m.topk, rows = rec.meta[2];
  // Combine: z = gate · y, so dgate = <dz, y> and dy = gate · dz.
  float* dz = ws.rows_a;
  moe_tokens_to_rows(dz, dout, rec, ws, sh);
  row_dots(ws.dgate_rows, dz, rec.y, rows, sh.h);
  scale_rows(dz, dz, rec.gate_rows, rows, sh.h);
  experts_backward(ws.rows_b, g, dz, rec, ws, w, sh);
  moe_rows_to_tokens(din, ws.rows_b, rec, ws, sh);
  if (m.shared_f > 0) {
    const GptShapes ssh = shared_shapes(sh);
    const BlockCall scall{ssh, call.ctx, call.layer, call.sample0, call.full_a, call.full_b};
    if (rec.recompute_shared) {
      // shared_experts (Megatron's checkpointed shared expert): its forward
      // again from the block's kept input, into the workspace's record.
      const PassContext again = call.ctx.recomputing();
      const BlockCall recall{ssh, again, call.layer, call.sample0, call.full_a, call.full_b};
      ws.shared_rec.in = rec.in;
      mlp_block_forward(ws.shared_io, ws.shared_rec, w.shared, recall);
    }
    const MlpRecord& shared = rec.recompute_shared ? ws.shared_rec : rec.shared;
    mlp_block_backward(ws.shared_io, g.shared, dout, shared, ws.shared, w.shared, scall);
    add_inplace(din, ws.shared_io, n * sh.h);
  }
  // Router: the gates' gradient, then the auxiliary losses'.
  moe_gate_grad_back(ws.dprob, ws.dgate_rows, rec, ws, sh);
  moe_topk_backward(ws.dlogits, ws.dprob, rec.expert, rec.prob, rec.scores, n, E, k, m.routing);
  const double scale = call.ctx.aux_loss_scale;
  if (m.aux_seqs > 0 && m.aux_coeff > 0)
    moe_aux_loss_backward(ws.dlogits, rec.scores, rec.counts, n, E,
                          std::max<int64_t>(1, m.aux_seqs), scale * m.aux_coeff * aux_scale(sh),
                          m.routing.score);
  if (m.z_coeff > 0)
    moe_z_loss_backward(ws.dlogits, rec.logits, n, E, scale * m.z_coeff / group_tokens(sh));
  moe_router_round(ws.dlogits, n * E, router_math(sh));  // the logits' gradient in their dtype
  const float* x32 = router_input(rec, ws, sh);
  linear_backward(din, g.router_w, nullptr, ws.dlogits, x32, router_weight(w.router_w, ws, sh), n,
                  sh.h, E, true);
}

MoeDecodeWorkspace carve_moe_decode_workspace(Arena& arena, const GptShapes& sh, int64_t rows) {
  const MoeShapes& m = moe_of(sh);
  MoeDecodeWorkspace ws;
  ws.logits = arena.alloc_f32(rows * m.experts);
  ws.bias32 = arena.alloc_f32(m.experts);
  ws.scores = arena.alloc_f32(rows * m.experts);
  ws.prob = arena.alloc_f32(rows * m.topk);
  ws.expert = reinterpret_cast<int32_t*>(arena.alloc_f32(rows * m.topk));
  ws.rows = reinterpret_cast<int64_t*>(arena.alloc_f32(2 * rows));
  ws.gate = arena.alloc_f32(rows);
  ws.x = arena.alloc_f32(rows * sh.h);
  ws.fc = arena.alloc_f32(rows * m.f_in);
  ws.act = arena.alloc_f32(rows * m.f);
  ws.y = arena.alloc_f32(rows * sh.h);
  if (m.shared_f > 0) {
    ws.shared = carve_mlp_decode_workspace(arena, shared_shapes(sh), rows);
    ws.shared_out = arena.alloc_f32(rows * sh.h);
  }
  return ws;
}

double moe_decode_workspace_floats(const ModelConfig& c, int64_t tp, int64_t rows) {
  const double r = double(rows), f = double(c.moe_ffn()), h = double(c.hidden_size);
  double shared = 0;
  if (c.moe_shared_expert_intermediate_size > 0) {
    const int64_t fs = c.moe_shared_expert_intermediate_size / tp;
    shared = mlp_decode_workspace_floats(r, double(fs), double(c.fc1_rows(fs))) + r * h;
  }
  // logits, scores; prob, expert; rows (int64), gate; x; fc, act; y; the bias
  return r * (2.0 * double(c.num_experts) + 2.0 * double(c.moe_router_topk) + 3 +
              h + double(c.fc1_rows(c.moe_ffn())) + f + h) + shared + double(c.num_experts);
}

void moe_block_decode(float* out, MoeDecodeWorkspace& ws, const float* in,
                      const MoeParams<ReadView>& w, const GptShapes& sh, int64_t rows) {
  const MoeShapes& m = moe_of(sh);
  linear_forward(ws.logits, in, w.router_w, nullptr, rows, sh.h, m.experts);
  moe_router_round(ws.logits, rows * m.experts, router_math(sh));
  moe_topk_forward(ws.expert, ws.prob, ws.scores, ws.logits, rows, m.experts, m.topk,
                   routing_with_bias(m, w.expert_bias, ws.bias32));
  moe_router_round(ws.prob, rows * m.topk, router_math(sh));
  fill_zero(out, size_t(rows * sh.h) * sizeof(float));
  for (int64_t local = 0; local < m.local; ++local) {  // no capacity in inference, as in Megatron
    int64_t n = 0;  // the rows routed to this expert (a row picks an expert once)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < m.topk; ++j)
        if (ws.expert[r * m.topk + j] - m.first == local) {
          ws.rows[n] = r;
          ws.gate[n++] = ws.prob[r * m.topk + j];
        }
    if (n == 0) continue;
    const ExpertParams<ReadView>& e = w.experts[size_t(local)];
    gather_rows(ws.x, in, ws.rows, n, sh.h);
    linear_forward(ws.fc, ws.x, e.fc1_w, e.fc1_b, n, sh.h, m.f_in);
    if (sh.swiglu)
      swiglu_forward(ws.act, ws.fc, n, m.f);
    else
      plain_activation_forward(sh, ws.act, ws.fc, n * m.f);
    linear_forward(ws.y, ws.act, e.fc2_w, e.fc2_b, n, m.f, sh.h);
    scatter_add_rows(out, ws.y, ws.rows, ws.gate, n, sh.h);
  }
  // Every rank of the EP group decodes the same rows: the sum of their
  // experts' outputs is the layer's.
  if (m.ranks > 1) m.ep->all_reduce_sum(out, rows * sh.h);
  if (m.shared_f > 0) {
    mlp_block_decode(ws.shared_out, ws.shared, in, w.shared, shared_shapes(sh), rows);
    add_inplace(out, ws.shared_out, rows * sh.h);
  }
}

double MoeMlp::record_bytes(const BlockSizes& z, const LayerSpec& spec) {
  // The block works on the residual stream's rows (nl); the shared expert's
  // fc1 and act on the micro-batch's (n).
  return moe_record_bytes(shapes_of<MoeMlp>(z.kinds), int64_t(z.nl), int64_t(z.n), int64_t(z.h),
                          z.bf16, z.swiglu, moe_keeps(spec));
}

double MoeMlp::workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>& specs) {
  return moe_workspace_bytes(shapes_of<MoeMlp>(z.kinds), int64_t(z.nl), int64_t(z.n),
                             int64_t(z.h), z.bf16, z.swiglu, moe_recomputes(specs));
}

double MoeMlp::plan_recompute(const ModelConfig& c, const PlanDims& d, const LayerSpec& spec,
                              std::vector<double>& flops) {
  double values = 0;
  if (spec.recompute_act)  // the activation reads fc1 (f_in) and writes act (f) per routed row
    values += d.nl * double(c.moe_router_topk) * double(c.fc1_rows(c.moe_ffn()) + c.moe_ffn());
  if (spec.recompute_shared && c.moe_shared_expert_intermediate_size > 0) {
    const double fs = double(c.moe_shared_expert_intermediate_size);
    flops.push_back(2 * d.n * d.h * double(c.fc1_rows(int64_t(fs))) / d.tp);
    flops.push_back(2 * d.n * fs * d.h / d.tp);
  }
  return values;
}

void MoeMlp::plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops) {
  const double k = double(c.moe_router_topk), local = double(c.num_experts) / d.ep;
  const double rows = d.nl * k / local;  // an expert's rows, balanced
  const double f = double(c.moe_ffn());
  flops.push_back(2 * d.nl * d.h * double(c.num_experts));  // the router
  for (int64_t e = 0; e < int64_t(local); ++e) {  // whole on the rank: one GEMM each
    flops.push_back(2 * rows * d.h * double(c.fc1_rows(int64_t(f))));
    flops.push_back(2 * rows * f * d.h);
  }
  if (c.moe_shared_expert_intermediate_size > 0) {
    const double fs = double(c.moe_shared_expert_intermediate_size);
    flops.push_back(2 * d.n * d.h * double(c.fc1_rows(int64_t(fs))) / d.tp);
    flops.push_back(2 * d.n * fs * d.h / d.tp);
  }
}

double MoeMlp::plan_exchange_elements(const ModelConfig& c, const PlanDims& d) {
  return d.nl * double(c.moe_router_topk) * d.h;  // each rank's n·k routed rows
}

}  // namespace mt
