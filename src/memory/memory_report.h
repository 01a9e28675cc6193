// Memory per rank by class — parameters, gradients, optimizer state, saved
// activations, workspace — predicted in closed form from the model shape and
// the parallel layout, and printed next to what was measured (HostBuffer::
// resident_bytes of each class's buffer) and the process's peak RSS.
//
// The prediction is written from the model description (each block's closed
// form beside its record and workspace in model/blocks; GptActivations /
// GptWorkspace in model/gpt.h), NOT by running the code that carves the
// buffers, so that a ratio far from 1 in the report points at a real
// difference between plan and implementation. It
// ignores the 64-byte alignment of each carved tensor and the 2 MiB rounding
// of each buffer (ratios slightly above 1 for tiny models are expected).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels/precision.h"
#include "model/gpt_shapes.h"

namespace mt {

class DeviceBuffer;
class ModelRuntime;
class ParamRegistry;
struct TensorParallel;

// What the prediction needs to know about this rank.
struct MemoryPlan {
  // Parameters and optimizer.
  int64_t params_local = 0;            // floats this rank holds (ParamRegistry::total_floats())
  int64_t dp = 1;                      // data-parallel size (x CP: the optimizer's shards)
  bool distributed_optimizer = false;  // optimizer state sharded over dp (ZeRO-1)
  // Megatron-FSDP's optim_grads: the floats of the gradients' staging pool
  // (optim/staged_grads.h), the gradients themselves sharded over dp; -1:
  // one gradient per parameter.
  int64_t grads_staged = -1;
  // optim_grads_params: the floats of the weights' pool (the model's element
  // type), their pieces sharded over dp (bf16: a bf16 copy of them; fp32: they
  // are the optimizer's main weights, 4 more bytes per piece there); -1: none.
  int64_t params_staged = -1;
  std::string math = "fp32";           // "fp32" | "bf16" | "fp16" (math_mode_name)

  // One micro-batch's activation shape on this rank.
  int64_t s = 0, b = 0, h = 0;         // sequence, micro-batch, hidden (global sizes)
  int64_t a_local = 0;                 // attention heads on this rank (a / tp)
  int64_t g_local = 0;                 // query groups (key/value heads) on this rank; 0 → a_local
  int64_t head_dim = 0;                // attention head size d (--kv-channels); 0 → h / (a_local·tp)
  bool qk_layernorm = false;           // the attention block's q/k norms (their saved inputs)
  int64_t f_local = 0;                 // ffn hidden on this rank (f / tp)
  bool swiglu = false;                 // fc1 holds [gate | up]: 2 · f_local outputs
  bool rms_norm = false;               // norms keep rstd only (no mean)
  int64_t v_local = 0;                 // padded vocabulary on this rank (v / tp)
  int64_t mtp_depths = 0;              // MTP depths on this rank (model/mtp.h; last stage)
  LayerSpec mtp_spec;                  // their layers' blocks
  int64_t tp = 1;                      // tensor-parallel size
  int64_t cp = 1;                      // context-parallel size: s/cp rows of each sequence here
  bool sequence_parallel = false;      // residual stream cut to s/tp rows
  int64_t layers = 0;                  // transformer layers on this rank (all its chunks)
  int64_t chunks = 1;                  // model chunks (virtual pipeline stages) on this rank
  int64_t in_flight = 1;               // activation records kept per chunk (1 without pipelining)
  bool has_embedding = true;           // first stage (no saved tensors of its own: see .cc)
  bool has_output = true;              // last stage: final norm, loss head, logits
  // Full activation recompute (Megatron's --recompute-granularity full):
  // layers on this rank (all chunks) whose activations are kept; -1 = all
  // (no recompute). recompute_group_size: layers per recompute group, i.e. the
  // scratch layer records each chunk's record has (0 without recompute).
  int64_t recompute_layers_kept = -1;
  int64_t recompute_group_size = 0;
  // The block kinds of this rank's layers (model/blocks/block_kinds.h): of
  // every layer (all chunks: the workspace serves them all), of the layer
  // records kept and of the recompute scratch records (model/gpt.h
  // layer_records, what carve_activations carves), and the kinds' own sizes
  // (e.g. the MoE block's worst-case routed rows). Empty lists (plans made
  // by hand): recompute_layers_kept and recompute_group_size records of the
  // default kinds.
  std::vector<LayerSpec> layer_specs, kept_specs, scratch_specs;
  std::shared_ptr<const KindShapes> kinds;
  // Of params_local, the expert parameters: their optimizer state is sharded
  // over the expert-data-parallel group of edp ranks ((TP x CP x DP) / EP).
  int64_t params_expert = 0;
  int64_t edp = 1;
  // --async-save: the host copy the background writer saves from
  // (checkpoint/async_save.h); save_optim false: --no-save-optim.
  bool async_save = false;
  bool save_optim = true;
};

// Bytes of each class on this rank.
// async_save: --async-save's host copy of the checkpointed state (0 without).
struct MemoryClasses {
  double params = 0, grads = 0, optimizer = 0, activations = 0, workspace = 0;
  double async_save = 0;
  double total() const { return params + grads + optimizer + activations + workspace + async_save; }
};

// --async-save's host copy (checkpoint/async_save.h): every local weight as
// the model holds it (`weight_bytes` each: 2 in bf16 runs, else 4; ZeRO-3
// gathers them for the save) and, when `save_optim`, the optimizer state
// (`optimizer_bytes`: m, v and any main weights of this rank). The one
// formula: predict_memory applies it to the planned optimizer class, the
// writer's set-up (RunSaver) to the live optimizer's bytes, and the copy
// made at each save is checked against the latter.
double async_save_copy_bytes(int64_t params_local, int64_t weight_bytes, double optimizer_bytes,
                             bool save_optim);

// Closed-form prediction (see memory_report.cc for the formulas and their
// relation to Megatron's distributed-optimizer table and Korthikanti et al.).
MemoryClasses predict_memory(const MemoryPlan& plan);

// (params + grads + optimizer) / params_local: fp32 16, 8 + 8/d; bf16 18, 6 + 12/d.
double bytes_per_param(const MemoryPlan& plan);

// The plan of the rank `rt` describes (its shapes, chunks, recompute groups,
// activation records in flight), with its optimizer's sharding.
MemoryPlan memory_plan(const ModelRuntime& rt, int64_t dp, bool distributed_optimizer);
// The same plan before any memory exists, from what ModelRuntime's constructor
// takes (so a model too large for the host is refused before it is allocated).
MemoryPlan memory_plan(const ParamRegistry& reg, int64_t micro_batch, const TensorParallel& tp,
                       int64_t in_flight, const Recompute& recompute, MathMode math, int64_t dp,
                       bool distributed_optimizer);
// The same plan from the layout alone, without a communicator (`megatron
// plan`): a TP group of `tp_size` ranks (the registry's stage), sequence
// parallelism when `sequence_parallel` and tp_size > 1. The one above calls it.
MemoryPlan memory_plan(const ParamRegistry& reg, int64_t micro_batch, int64_t tp_size,
                       bool sequence_parallel, int64_t in_flight,
                       const Recompute& recompute, MathMode math, int64_t dp, bool distributed_optimizer);
// What the rank holds: the resident bytes each class's buffers added when
// they were first touched (HostBuffer::resident_bytes).
// grad_shard: optim_grads' accumulated gradient shard (counted as gradients);
// param_shard: optim_grads_params' bf16 weight pieces (counted as parameters).
// async_copy: the bytes of --async-save's host copy (RunSaver::host_copy_bytes).
MemoryClasses measure_memory(const ModelRuntime& rt, const DeviceBuffer& optimizer_state,
                             const DeviceBuffer* grad_shard = nullptr,
                             const DeviceBuffer* param_shard = nullptr, double async_copy = 0);

// One line per class (async save copy only when either side has one):
// predicted MB, measured MB, measured/predicted; then the total and the
// process's peak RSS.
std::string format_memory_report(const MemoryClasses& predicted, const MemoryClasses& measured,
                                 size_t peak_rss);
// {"<class>": {"predicted_bytes": p, "measured_bytes": m, "ratio": m/p or null},
//  ... for params, grads, optimizer, activations, workspace, (async_save
//  when either side has one), total,
//  "peak_rss_bytes": n}
nlohmann::json memory_report_json(const MemoryClasses& predicted, const MemoryClasses& measured,
                                  size_t peak_rss);

}  // namespace mt
