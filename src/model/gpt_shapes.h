// The shape context every block and the stage share: local sizes of one
// micro-batch on this rank, its parallel groups and how its GEMMs compute
// (GptShapes), and what a forward/backward pass knows about the step (PassContext).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/precision.h"
#include "kernels/rope.h"
#include "model/blocks/layer_spec.h"
#include "model/params.h"
#include "parallel/context_parallel.h"
#include "parallel/tensor_parallel_linear.h"

namespace mt {

struct KindShapes;  // model/blocks/block_kinds.h

// Local sizes of one micro-batch on this rank, and its tensor-parallel group.
// With sequence parallelism the residual stream, LayerNorms and dropout work
// on this rank's slab of s_local = s/tp positions starting at t0.
// With context parallelism s = s_global/CP rows: this rank's two sequence
// chunks (parallel/context_parallel.h), at global positions
// cp_global_position(); per-head tensors are then chunk-major (2, b, a, s/2, d).
struct GptShapes {
  int64_t s = 0, b = 0, h = 0;  // sequence rows on this rank (s_global/CP), micro-batch, hidden
  int64_t s_global = 0;          // the whole sequence
  int64_t s_local = 0, t0 = 0;   // residual-stream rows on this rank (s/tp with SP)
  int64_t a = 0, d = 0;          // local heads, head dim
  int64_t g = 0;                 // local query groups (key/value heads); a with no GQA
  int64_t f = 0, v = 0;          // local ffn, local (padded) vocab
  int64_t f_in = 0;              // local fc1 rows: f, or 2f ([gate | up]) with SwiGLU
  int64_t v_start = 0;           // first vocab row of this shard
  int64_t max_pos = 0;
  int64_t vocab_size = 0;        // real (unpadded) vocabulary: ids must be below it
  int64_t num_layers = 0;        // layers on this stage
  int64_t layer_begin = 0;       // global index of the first one
  int64_t total_layers = 0;      // in the whole model
  int64_t a_global = 0, head0 = 0;
  bool has_embedding = true, has_output = true;
  bool rms_norm = false;         // RMSNorm, else LayerNorm
  bool learned_positions = true; // a position-embedding table
  bool swiglu = false;           // silu(gate) * up, else GELU
  bool squared_relu = false;     // relu(x)^2, else GELU (not gated)
  bool zero_centered_gamma = false;  // --apply-layernorm-1p: norms scale by (1 + weight)
  bool qk_layernorm = false;     // the attention's q/k norms (--qk-layernorm, of rms_norm's kind)
  int64_t window_left = -1;      // --window-size L,0: keys >= query - L (-1: unbounded)
  std::vector<LayerSpec> layer_specs;  // of this chunk's layers (make_shapes); see spec()
  // Multi-token prediction (model/mtp.h) after the loss head: its depths
  // (0: none, or not the chunk with the output), their layers' blocks and
  // --mtp-loss-scaling-factor.
  int64_t mtp_depths = 0;
  LayerSpec mtp_spec;
  float mtp_scale = 0.f;
  // The block kinds' own sizes (model/blocks/block_kinds.h: shapes_of<Kind>);
  // null in shapes made by hand (tests): every kind's defaults.
  std::shared_ptr<const KindShapes> kinds;
  std::shared_ptr<const RopeTable> rope;  // rotary embedding of q and k, if used
  int64_t rope_positions = 0;    // the positions a RoPE table covers (a kind's own too)
  float eps = 1e-5f, hidden_dropout = 0.f, attention_dropout = 0.f;
  TensorParallel tp;             // TP group (null or size 1: no tensor parallelism)
  ContextParallel cp;            // CP group (null or size 1: the whole sequence here)
  // How the GEMMs compute (fp32, or bf16/fp16 operands with fp32 accumulation).
  // In bf16 the weights (GptWeights) and the saved activations are bf16 too.
  Compute cm;
  // Full activation recompute (Megatron's --recompute-granularity full):
  // recompute_group[l] (local layer l) is the first local layer of the group
  // it is recomputed with, or -1 when its activations are kept. A group keeps
  // only its layers' inputs (the residual stream); backward re-runs its
  // forward into shared scratch records first (the same dropout masks: they
  // are keyed by iteration, sample and layer).
  std::vector<int64_t> recompute_group;
  int64_t recompute_group_size = 0;  // layers per group (scratch records planned)
  // Local layer l's blocks; shapes made by hand (tests) without specs have dense layers.
  LayerSpec spec(int64_t l) const {
    return layer_specs.empty() ? LayerSpec{} : layer_specs.at(size_t(l));
  }
  int64_t tokens() const { return s * b; }
  int64_t cp_chunks() const { return cp.chunks(); }  // sequence chunks on this rank (1 or 2)
  int64_t chunk_len() const { return s / cp.chunks(); }
  int64_t chunk_pos0(int64_t j) const {  // global position of chunk j's first token
    return cp.size() > 1 ? cp_chunk_pos0(cp.size(), cp.rank(), chunk_len(), j) : 0;
  }
  int64_t global_position(int64_t r) const {  // of this rank's row r
    return cp_global_position(cp.size(), cp.rank(), s, r);
  }
  int64_t local_tokens() const { return s_local * b; }
};
// `rope_positions`: the positions the RoPE table covers; 0 is --seq-length,
// every position a forward over a sample sees (not max_position_embeddings,
// which can be far larger: 16M positions of a converted model would be a GB
// of table). The KV-cache decoder passes its cache's positions.
// `ep`: the expert-parallel group (null: every expert here).
GptShapes make_shapes(const ParamRegistry& reg, int64_t micro_batch,
                      const TensorParallel& tp = TensorParallel{}, int chunk = 0,
                      const ContextParallel& cp = ContextParallel{}, int64_t rope_positions = 0,
                      const Communicator* ep = nullptr);

// Megatron's --recompute-method over this chunk's layers: "uniform" makes
// groups of `num_layers` consecutive layers, "block" recomputes the first
// `num_layers` layers one by one; "" (or num_layers 0) recomputes nothing.
void set_full_recompute(GptShapes& sh, const std::string& method, int64_t num_layers);

// Which activations a run recomputes (Megatron's --recompute-* flags).
// Full granularity: `method` ("uniform" | "block") and `num_layers`, as
// set_full_recompute; "" keeps every layer's record. Selective granularity:
// `modules`, Megatron's --recompute-modules, of which the MLP slot's kinds'
// ("mlp": dense MLPs, "moe": MoE layers) drop that block's record
// (LayerSpec::recompute_mlp); "core_attn" is what the attention always does
// here (it keeps no probabilities).
struct Recompute {
  std::string method;
  int64_t num_layers = 0;
  std::vector<std::string> modules;
};
// Sets this chunk's recompute groups and its layer specs' recompute_mlp.
void set_recompute(GptShapes& sh, const Recompute& r);

// What the MoE layers of one iteration report (summed over the layers and
// micro-batches of this rank; the trainer reduces them over the ranks).
struct MoeStats {
  double load_balancing_loss = 0;  // the aux losses over their coefficient (this rank's part)
  double z_loss = 0;               // the z-losses over their coefficient (this rank's part)
  double busiest_share = 0;        // the largest share of routed tokens one expert took
  int64_t layer_passes = 0;        // MoE layer forwards counted (training)
  // --moe-router-enable-expert-bias: (L, E) each MoE layer's kept (token,
  // choice) pairs per expert over this rank's tokens (Megatron's
  // local_tokens_per_expert); sized by the trainer, empty otherwise.
  std::vector<double> expert_tokens;
};

// What a forward/backward pass needs to know about the step.
// A micro-batch's documents as the layers see them (model/micro_batch.h);
// null: one document per sample, positions 0, 1, ...
struct TokenDocuments {
  const int32_t* positions = nullptr;  // (s, b) this rank's rows, sequence-first (RoPE)
  const int32_t* doc_start = nullptr;  // (b, s_global) each query's first visible key
};

struct PassContext {
  uint64_t seed = 0;
  int64_t iteration = 0;   // dropout masks are keyed by it
  bool training = true;    // dropout on, loss-head gradient computed
  // With a loss mask (--eod-mask-loss) a token's factor is its mask times, by
  // default, (b · s) / the micro-batch's counted tokens (Megatron averages each
  // micro-batch over its own count); with --calculate-per-token-loss
  // (per_token_loss) the mask alone: grad_scale then divides by the
  // iteration's counted tokens.
  bool per_token_loss = false;
  float grad_scale = 1.f;  // d(total loss)/d(token loss): 1 / tokens averaged over
  // d(total loss)/d(an MoE layer's auxiliary losses): Megatron's
  // MoEAuxLossAutoScaler scale, loss scale / micro-batches.
  float aux_loss_scale = 1.f;
  // Where MoE layers add what the log reports (null: nothing collected).
  struct MoeStats* moe_stats = nullptr;
  // Where the MTP depths add their losses (model/mtp.h; null: nothing collected).
  struct MtpStats* mtp_stats = nullptr;
  // Called in backward when a part's parameter gradients are final (set by the
  // schedule for the last micro-batch only): layer index, total_layers for the
  // final norm, -1 for the embeddings.
  const std::function<void(int64_t)>* grads_ready = nullptr;
  // Called in forward and backward just before a part's parameters are read
  // (forward, backward, a recomputed forward), with the same part numbers
  // (the output layer asks for -1 too: it is the tied word embedding). Set by
  // the distributed optimizer with --overlap-param-gather, to wait for that
  // part's parameter all-gather, and by optim_grads_params, to gather it.
  const std::function<void(int64_t)>* params_needed = nullptr;
  // The context of a recomputed forward (full or selective recompute): the
  // same step and keys, so the same activations, but nothing reported twice
  // (the MoE layers' router losses and the expert bias's token counts).
  PassContext recomputing() const {
    PassContext c = *this;
    c.moe_stats = nullptr;
    return c;
  }
};

}  // namespace mt
