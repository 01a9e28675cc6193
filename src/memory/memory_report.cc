#include "memory/memory_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/arena.h"
#include "core/divide.h"
#include "core/error.h"
#include "kernels/precision.h"
#include "model/blocks/transformer_layer.h"
#include "model/gpt.h"
#include "model/model_runtime.h"

namespace mt {

namespace {

void check_plan(const MemoryPlan& p) {
  MT_CHECK(p.math == "fp32" || p.math == "bf16" || p.math == "fp16", "memory plan: math '", p.math,
           "' is not one of fp32, bf16, fp16; fix: pass math_mode_name() of the run");
  MT_CHECK(p.params_local >= 0 && p.dp >= 1, "memory plan: params_local ", p.params_local, " dp ",
           p.dp, "; fix: params_local >= 0 (ParamRegistry::total_floats()) and dp >= 1");
  MT_CHECK(p.s > 0 && p.b > 0 && p.h > 0 && p.a_local > 0 && p.f_local > 0 && p.tp >= 1,
           "memory plan: s ", p.s, " b ", p.b, " h ", p.h, " a_local ", p.a_local, " f_local ",
           p.f_local, " tp ", p.tp,
           "; fix: pass the micro-batch shape and this rank's local sizes");
  MT_CHECK(!p.has_output || p.v_local > 0, "memory plan: v_local ", p.v_local,
           " on a rank with the output layer; fix: pass the padded vocabulary / tp");
  MT_CHECK(p.chunks >= 1 && p.in_flight >= 1 && p.layers >= 0, "memory plan: chunks ", p.chunks,
           " in_flight ", p.in_flight, " layers ", p.layers,
           "; fix: chunks >= 1, in_flight >= 1, layers >= 0");
  const int64_t per_chunk = divide(p.layers, p.chunks, "memory plan: layers per model chunk");
  if (p.recompute_layers_kept >= 0) {
    MT_CHECK(p.recompute_layers_kept <= p.layers, "memory plan: recompute_layers_kept ",
             p.recompute_layers_kept, " > layers ", p.layers, "; fix: count kept layers, or -1");
    divide(p.recompute_layers_kept, p.chunks, "memory plan: kept layers per model chunk");
  }
  const bool recompute = p.recompute_layers_kept >= 0 && p.recompute_layers_kept < p.layers;
  MT_CHECK(!recompute || (p.recompute_group_size >= 1 && p.recompute_group_size <= per_chunk),
           "memory plan: recompute_group_size ", p.recompute_group_size, " with ",
           p.layers - p.recompute_layers_kept, " recomputed layers and ", per_chunk,
           " layers per chunk; fix: pass the layers per group (1 for 'block')");
}

}  // namespace

// Bytes per parameter. Megatron-LM's table (docs, "Distributed Optimizer";
// d = data-parallel size, fp32 main weights and fp32 Adam m, v always):
//   fp32 params, fp32 grads:  16 → 8 + 8/d    (4 param + 4 grad | 8 m, v)
//   bf16 params, fp32 grads:  18 → 6 + 12/d   (2 param + 4 grad | 4 main + 8 m, v)
//   fp16 params, fp16 grads:  20 → 4 + 16/d
// Ours is Megatron's: the model holds its weights as it computes with them —
// fp32 (4), or bf16 in bf16 runs (2; every kernel reads bf16 weights) —
// gradients are one fp32 buffer (4, replicated as in Megatron's ZeRO-1), and
// the optimizer holds fp32 Adam m and v (8) plus, in bf16 runs, the fp32
// main weights (4), divided by d with the distributed optimizer. So
//   fp32: 16 → 8 + 8/d;   bf16: 18 → 6 + 12/d;
//   fp16: 16 → 8 + 8/d (emulated: fp32 weights, fp16 operands rounded into
//   the matmul kernel's own fp32 scratch).
// Megatron-FSDP's optim_grads shards the gradients too: 4/d per parameter
// plus the staging pool (the embeddings, the loss head and the largest layer);
// optim_grads_params the weights too: fp32 16/d (the weights are the
// optimizer's main weights) and bf16 (2 + 4 + 12)/d, plus a pool each for
// the weights and the gradients.
MemoryClasses predict_memory(const MemoryPlan& p) {
  check_plan(p);
  MemoryClasses m;
  const double P = double(p.params_local);
  const bool bf16 = p.math == "bf16";
  const bool zero3 = p.params_staged >= 0;
  const double pool = double(p.params_staged);
  m.params = zero3 ? (bf16 ? 2.0 * (pool + P / double(p.dp)) : 4.0 * pool) : P * (bf16 ? 2.0 : 4.0);
  // optim_grads: the staging pool and this rank's shard (its pieces of the
  // buckets, P/dp up to their rounding).
  m.grads = 4.0 * (p.grads_staged >= 0 ? double(p.grads_staged) + P / double(p.dp) : P);
  const double experts = double(p.params_expert);
  m.optimizer = (bf16 || zero3 ? 12.0 : 8.0) *
                ((P - experts) / double(p.distributed_optimizer ? p.dp : 1) +
                 experts / double(p.distributed_optimizer ? p.edp : 1));

  // Local sizes (float counts). n: tokens of a micro-batch; nl: rows of the
  // residual stream on this rank (n/t with sequence parallelism); hl: the
  // attention width on this rank (a_local · head_dim; h/t without --kv-channels).
  // Context parallelism: this rank's s/cp rows of each sequence (activations ÷ CP).
  const int64_t s = p.cp > 1 ? divide(p.s, 2 * p.cp, "memory plan: s / (2 cp)") * 2 : p.s;
  const double n = double(s * p.b);
  const double nl =
      p.sequence_parallel ? double(divide(s, p.tp, "memory plan: s / tp") * p.b) : n;
  const double h = double(p.h);
  const double hl = p.head_dim > 0 ? double(p.a_local * p.head_dim)
                                   : double(divide(p.h, p.tp, "memory plan: h / tp"));
  const double e = bf16 ? 2.0 : 4.0;  // bytes of a saved value
  BlockSizes z;
  z.n = n, z.nl = nl, z.h = h, z.hl = hl;
  z.a = double(p.a_local), z.g = double(p.g_local > 0 ? p.g_local : p.a_local);
  z.f = double(p.f_local), z.f_in = p.swiglu ? 2 * z.f : z.f;  // fc1 outputs
  z.stats = p.rms_norm ? 1 : 2;  // norm statistics per row: rstd (and mean)
  z.qk_norm = p.qk_layernorm;
  z.e = e, z.bf16 = bf16, z.swiglu = p.swiglu;
  z.b = p.b, z.kv = p.cp > 1 ? s / 2 : s, z.cp = p.cp;  // keys of one attention kernel call
  z.kinds = p.kinds.get();

  // One LayerActivations record without its input/output (those are rows of
  // GptActivations::hidden): the sum over its blocks (model/blocks), each
  // block's formula beside its carve:
  //   norms (ln1, ln2)                 2 · (nl·h values + stats·nl fp32)
  //   attention q, k, v, ctx_sbh       4 · n·hl values; fp32 runs also ctx (n·hl); lse n·a fp32
  //   residual after attention (mid)   nl·h values
  //   MLP fc1, act                     n·(f_in + f) values
  //
  // Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  // Transformer Models", eq. 1): sbh(34 + 5as/h) bytes per layer in fp16
  // (2-byte values, 1-byte dropout masks), 34sbh with selective recompute of
  // the attention core, 34sbh/t with TP + SP; each block's share is mapped in
  // its formula, and the LayerNorm inputs 4sbh ↔ the layer's input (a row of
  // hidden) and mid. fp32 runs store every value in fp32 and one more: ctx
  // in the attention kernel's (b, a, s, d) layout next to its (s, b, h) copy.
  // Per layer with its input: 17·sbh floats = 68·sbh bytes (+ 4·(4 + a)·sb
  // for the norm statistics and lse) against Korthikanti's 32·sbh bytes of
  // values + 2·sbh of masks; with TP + SP every term is divided by t: 68·sbh/t.
  // bf16 runs store the values in bf16 (e = 2 bytes) and not ctx (the bf16
  // attention backward does not read it): 16·sbh values, 32·sbh bytes —
  // Korthikanti's count; the statistics stay fp32.
  // Each kind's record by its own formula (an MoE layer's for its worst-case routing).
  // One GptActivations record of a chunk of Lc layers: ids, positions and
  // labels (3 · n 4-byte slots on every stage; the embedding output is
  // hidden[0], so the first stage saves nothing more), the Lc + 1 residual
  // stream boundaries `hidden` (Lc+1, s_local, b, h), and the layer records:
  // all Lc of them without recompute; with full recompute only the kept
  // layers' records plus one group's shared scratch records (the recomputed
  // layers keep just their inputs, already in hidden).
  std::vector<LayerSpec> kept = p.kept_specs, scratch = p.scratch_specs;
  if (kept.empty() && scratch.empty()) {  // a plan made by hand: the default kinds
    const int64_t k = p.recompute_layers_kept < 0 ? p.layers : p.recompute_layers_kept;
    kept.assign(size_t(k), LayerSpec{});
    if (k < p.layers) scratch.assign(size_t(p.recompute_group_size * p.chunks), LayerSpec{});
  }
  double layers_bytes = 0;  // over all chunks
  for (const LayerSpec& spec : kept) layers_bytes += layer_record_bytes(z, spec);
  for (const LayerSpec& spec : scratch) layers_bytes += layer_record_bytes(z, spec);
  const double per_chunk = double(p.layers / p.chunks);
  // (bf16: at least 2 boundary rows, whose bytes hold the fp32 input gradient
  // a pipeline stage sends back.)
  const double boundaries = bf16 ? std::max(per_chunk + 1, 2.0) : per_chunk + 1;
  const double record = 4 * 3 * n + e * boundaries * nl * h;
  // The last stage's chunk also keeps the final norm's statistics (lnf_mean,
  // lnf_rstd: (s_local, b)), the gradient of its output that the fused loss
  // head computed in forward (dlnf: (s_local, b, h)) and per-token losses
  // (s, b), all fp32. The norm's output itself is only read inside forward (workspace).
  // With MTP also its depths' records (model/mtp.h's formula beside its carve).
  const double head = p.has_output ? 4 * (nl * h + z.stats * nl + n) +
                                         mtp_record_bytes(z, p.mtp_spec, p.mtp_depths)
                                   : 0.0;
  m.activations = double(p.in_flight) * (double(p.chunks) * record + layers_bytes + head);

  // GptWorkspace, one per rank (shared by all chunks and micro-batches): the
  // blocks' scratch (LayerWorkspace, each block's formula) and, in floats,
  //   hbuf, dres, dln (s_local, b, h)           3 · nl·h
  //   full_a, full_b (s, b, h)                  2 · n·h
  //   last stage: logits (s, b, v/t), ce_max (s, b), ce_sum and ce_target
  //   (s, b) doubles                            n·v + 5n
  //   (bf16 adds the logits' gradient in bf16: n·v/2)
  const double logits = n * double(p.v_local) * (bf16 ? 1.5 : 1.0);
  const double loss_head = p.has_output ? logits + 5 * n : 0.0;
  m.workspace =
      4.0 * (3 * nl * h + 2 * n * h + loss_head) + layer_workspace_bytes(z, p.layer_specs) +
      (p.has_output ? mtp_workspace_bytes(z, p.mtp_depths, p.tp) : 0.0);
  if (p.async_save)
    m.async_save = async_save_copy_bytes(p.params_local, bf16 ? 2 : 4, m.optimizer, p.save_optim);
  return m;
}

double async_save_copy_bytes(int64_t params_local, int64_t weight_bytes, double optimizer_bytes,
                             bool save_optim) {
  return double(params_local) * double(weight_bytes) + (save_optim ? optimizer_bytes : 0.0);
}

double bytes_per_param(const MemoryPlan& plan) {
  MT_CHECK(plan.params_local > 0, "bytes_per_param: params_local ", plan.params_local,
           " must be > 0");
  const MemoryClasses m = predict_memory(plan);
  return (m.params + m.grads + m.optimizer) / double(plan.params_local);
}

namespace {

struct ClassRow {
  const char* name;  // the text report's and the JSON's key
  double predicted, measured;
  const char* key = nullptr;  // the JSON's, when it differs
};

std::vector<ClassRow> rows(const MemoryClasses& p, const MemoryClasses& m) {
  std::vector<ClassRow> r = {{"params", p.params, m.params},
                             {"grads", p.grads, m.grads},
                             {"optimizer", p.optimizer, m.optimizer},
                             {"activations", p.activations, m.activations},
                             {"workspace", p.workspace, m.workspace}};
  if (p.async_save > 0 || m.async_save > 0)
    r.push_back({"async save copy", p.async_save, m.async_save, "async_save"});
  r.push_back({"total", p.total(), m.total()});
  return r;
}

}  // namespace

std::string format_memory_report(const MemoryClasses& predicted, const MemoryClasses& measured,
                                 size_t peak_rss) {
  std::string out = "memory per rank (MB)   predicted    measured   measured/predicted\n";
  char line[160];
  for (const ClassRow& r : rows(predicted, measured)) {
    char ratio[32] = "-";
    if (r.predicted > 0) std::snprintf(ratio, sizeof ratio, "%.3f", r.measured / r.predicted);
    std::snprintf(line, sizeof line, "  %-18s %11.2f %11.2f   %s\n", r.name, r.predicted / 1e6,
                  r.measured / 1e6, ratio);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-18s %11s %11.2f\n", "process peak RSS", "",
                double(peak_rss) / 1e6);
  out += line;
  return out;
}

nlohmann::json memory_report_json(const MemoryClasses& predicted, const MemoryClasses& measured,
                                  size_t peak_rss) {
  nlohmann::json j;
  for (const ClassRow& r : rows(predicted, measured))
    j[r.key != nullptr ? r.key : r.name] = {{"predicted_bytes", r.predicted},
                 {"measured_bytes", r.measured},
                 {"ratio", r.predicted > 0 ? nlohmann::json(r.measured / r.predicted)
                                           : nlohmann::json(nullptr)}};
  j["peak_rss_bytes"] = peak_rss;
  return j;
}

namespace {

// The kinds of the layers and of the records of the chunks `chunks`.
void add_layer_records(MemoryPlan& p, const std::vector<const GptShapes*>& chunks) {
  for (const GptShapes* c : chunks) {
    const LayerRecords r = layer_records(*c);
    for (int64_t l = 0; l < c->num_layers; ++l) p.layer_specs.push_back(c->spec(l));
    p.kept_specs.insert(p.kept_specs.end(), r.kept.begin(), r.kept.end());
    p.scratch_specs.insert(p.scratch_specs.end(), r.scratch.begin(), r.scratch.end());
  }
}

// The plan of a rank whose model chunks have shapes `chunks` (recompute and
// math set), with `in_flight` activation records per chunk.
MemoryPlan plan_of_chunks(const ParamRegistry& reg, const std::vector<const GptShapes*>& chunks,
                          int64_t in_flight, int64_t dp, bool distributed_optimizer) {
  const GptShapes& sh = *chunks[0];
  MemoryPlan p;
  p.params_local = reg.total_floats();
  p.dp = dp;
  p.distributed_optimizer = distributed_optimizer;
  p.math = math_mode_name(sh.cm.math);
  p.s = sh.s_global;
  p.cp = sh.cp.size();
  p.b = sh.b;
  p.h = sh.h;
  p.a_local = sh.a;
  p.g_local = sh.g;
  p.head_dim = sh.d;
  p.qk_layernorm = sh.qk_layernorm;
  p.f_local = sh.f;
  p.swiglu = sh.swiglu;
  p.rms_norm = sh.rms_norm;
  p.v_local = sh.v;
  p.tp = sh.tp.size();
  p.sequence_parallel = sh.tp.sequence_parallel;
  p.chunks = int64_t(chunks.size());
  p.in_flight = in_flight;
  p.has_embedding = reg.stage().has_embedding;
  p.has_output = reg.stage().has_output;
  p.mtp_depths = chunks.back()->mtp_depths;
  p.mtp_spec = chunks.back()->mtp_spec;
  p.kinds = sh.kinds;
  add_layer_records(p, chunks);
  int64_t kept = 0;
  for (const GptShapes* c : chunks) {
    p.layers += c->num_layers;
    for (int64_t l = 0; l < c->num_layers; ++l)
      kept += c->recompute_group.empty() || c->recompute_group[size_t(l)] < 0;
  }
  p.recompute_layers_kept = kept == p.layers ? -1 : kept;
  p.recompute_group_size = kept == p.layers ? 0 : sh.recompute_group_size;
  return p;
}

}  // namespace

MemoryPlan memory_plan(const ModelRuntime& rt, int64_t dp, bool distributed_optimizer) {
  std::vector<const GptShapes*> chunks;
  for (int c = 0; c < rt.num_chunks(); ++c) chunks.push_back(&rt.chunks[size_t(c)].sh);
  return plan_of_chunks(rt.reg, chunks, int64_t(rt.slots_per_chunk()), dp,
                        distributed_optimizer);
}

MemoryPlan memory_plan(const ParamRegistry& reg, int64_t micro_batch, const TensorParallel& tp,
                       int64_t in_flight, const Recompute& recompute, MathMode math, int64_t dp,
                       bool distributed_optimizer) {
  MT_CHECK(tp.size() == reg.stage().tp_size, "TP group of size ", tp.size(),
           " for a parameter list built for TP ", reg.stage().tp_size, " (internal error)");
  return memory_plan(reg, micro_batch, tp.size(), tp.sequence_parallel, in_flight,
                     recompute, math, dp, distributed_optimizer);
}

// The local sizes make_shapes (model/gpt.cc) gives each chunk, from the
// configuration and the stage alone; tests compare the result with the plan of
// a live ModelRuntime (memory_plan(rt, ...)).
MemoryPlan memory_plan(const ParamRegistry& reg, int64_t micro_batch, int64_t tp_size,
                       bool sequence_parallel, int64_t in_flight,
                       const Recompute& recompute, MathMode math, int64_t dp, bool distributed_optimizer) {
  const ModelConfig& c = reg.config();
  const StageLayout& st = reg.stage();
  MT_CHECK(tp_size == st.tp_size, "memory plan: TP ", tp_size,
           " for a parameter list built for TP ", st.tp_size, " (internal error)");
  MemoryPlan p;
  p.params_local = reg.total_floats();
  p.dp = dp;
  p.distributed_optimizer = distributed_optimizer;
  p.math = math_mode_name(math);
  p.s = c.seq_length;
  p.b = micro_batch;
  p.h = c.hidden_size;
  p.a_local = divide(c.num_attention_heads, tp_size, "--num-attention-heads by TP");
  p.g_local = divide(c.query_groups(), tp_size, "--num-query-groups by TP");
  p.head_dim = c.head_dim();
  p.qk_layernorm = c.qk_layernorm;
  p.f_local = divide(c.ffn_hidden_size, tp_size, "--ffn-hidden-size by TP");
  p.swiglu = c.swiglu;
  p.rms_norm = c.rms_norm();
  p.v_local = divide(c.padded_vocab_size, tp_size, "padded vocabulary by TP");
  p.tp = tp_size;
  p.sequence_parallel = sequence_parallel && tp_size > 1;
  const auto ranges = st.chunk_ranges();
  p.chunks = int64_t(ranges.size());
  p.in_flight = in_flight;
  p.has_embedding = st.has_embedding;
  p.has_output = st.has_output;
  p.mtp_depths = st.has_output ? c.mtp_num_layers : 0;
  p.mtp_spec = mtp_layer_spec(c);
  mark_recomputed(p.mtp_spec, recompute.modules);  // as set_recompute marks a chunk's
  int64_t kept = 0, group_size = 0;
  std::vector<GptShapes> shapes;  // each chunk's layers, kinds and recompute groups
  for (const auto& [begin, end] : ranges) {
    GptShapes sh;
    sh.num_layers = end - begin;
    for (int64_t l = begin; l < end; ++l) sh.layer_specs.push_back(layer_spec(c, l));
    set_recompute(sh, recompute);
    p.layers += sh.num_layers;
    for (int64_t g : sh.recompute_group) kept += g < 0;
    if (group_size == 0) group_size = sh.recompute_group_size;
    shapes.push_back(std::move(sh));
  }
  std::vector<const GptShapes*> chunk_shapes;
  for (const GptShapes& sh : shapes) chunk_shapes.push_back(&sh);
  add_layer_records(p, chunk_shapes);
  p.recompute_layers_kept = kept == p.layers ? -1 : kept;
  p.recompute_group_size = kept == p.layers ? 0 : group_size;
  GptShapes sized;  // what the kinds' sizes read: the micro-batch (seq_aux_loss), no groups
  sized.b = micro_batch;
  p.kinds = make_kind_shapes(c, st, sized, nullptr);
  if (c.moe()) {
    p.params_expert = reg.total_floats() - reg.group_begin(GradGroup::kExpertDataParallel);
    p.edp = dp * tp_size / st.ep_size;  // dp here is DP x CP
  }
  return p;
}

MemoryClasses measure_memory(const ModelRuntime& rt, const DeviceBuffer& optimizer_state,
                             const DeviceBuffer* grad_shard, const DeviceBuffer* param_shard,
                             double async_copy) {
  MemoryClasses m;
  m.params = double(rt.params_buffer().resident_bytes()) +
             (param_shard ? double(param_shard->resident_bytes()) : 0.0);
  m.grads = double(rt.grads_buffer().resident_bytes()) +
            (grad_shard ? double(grad_shard->resident_bytes()) : 0.0);
  m.optimizer = double(optimizer_state.resident_bytes());
  m.activations = double(rt.activations_buffer().resident_bytes());
  m.workspace = double(rt.workspace_buffer().resident_bytes());
  m.async_save = async_copy;
  return m;
}

}  // namespace mt
