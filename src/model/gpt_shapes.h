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

// The mixture-of-experts layers' sizes on this rank (model/blocks/moe_block.h).
struct MoeShapes {
  int64_t experts = 0;      // E (0: no MoE layer)
  int64_t local = 0;        // experts held here: E / EP
  int64_t first = 0;        // global index of the first one
  int64_t topk = 0;
  int64_t f = 0, f_in = 0;  // an expert's ffn and fc1 rows (2f with SwiGLU)
  bool pre_softmax = false;
  bool router_fp32 = false;  // --moe-router-dtype fp32: logits and probs fp32 in any run
  int64_t aux_seqs = 0;     // 0: no load-balancing loss; 1: aux_loss; b: seq_aux_loss
  float aux_coeff = 0, z_coeff = 0;
  double capacity_factor = -1;  // < 0: dropless
  int64_t capacity = 0;     // each expert's pairs from one rank's n tokens (with a factor)
  bool drop_by_position = false, pad_to_capacity = false;
  bool alltoall = false;    // the dispatcher: all-to-all, else all-gather
  bool grouped = false;     // --moe-grouped-gemm: the local experts as one batched product
  // The expert-parallel group (null for shapes only planned: memory formulas).
  const Communicator* ep = nullptr;
  int64_t ranks = 1, rank = 0;  // EP size and this rank's index
  int64_t ep_size() const { return ranks; }
  int64_t ep_rank() const { return rank; }
  int64_t max_rows = 0;     // the experts' input rows on this rank, at most (padded)
  // The shared expert (a dense MLP every token visits, TP-split like the
  // dense one): its local ffn and fc1 rows (0: none).
  int64_t shared_f = 0, shared_f_in = 0;
};

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
  bool qk_layernorm = false;     // the attention's q/k norms (--qk-layernorm, of rms_norm's kind)
  std::vector<LayerSpec> layer_specs;  // of this chunk's layers (make_shapes); see spec()
  MoeShapes moe;                 // MoE layers' sizes (experts 0 without them)
  std::shared_ptr<const RopeTable> rope;  // rotary embedding of q and k, if used
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

// What the MoE layers of one iteration report (summed over the layers and
// micro-batches of this rank; the trainer reduces them over the ranks).
struct MoeStats {
  double load_balancing_loss = 0;  // the aux losses over their coefficient (this rank's part)
  double z_loss = 0;               // the z-losses over their coefficient (this rank's part)
  double busiest_share = 0;        // the largest share of routed tokens one expert took
  int64_t layer_passes = 0;        // MoE layer forwards counted (training)
};

// What a forward/backward pass needs to know about the step.
struct PassContext {
  uint64_t seed = 0;
  int64_t iteration = 0;   // dropout masks are keyed by it
  bool training = true;    // dropout on, loss-head gradient computed
  float grad_scale = 1.f;  // d(total loss)/d(token loss): 1 / tokens averaged over
  // d(total loss)/d(an MoE layer's auxiliary losses): Megatron's
  // MoEAuxLossAutoScaler scale, loss scale / micro-batches.
  float aux_loss_scale = 1.f;
  // Where MoE layers add what the log reports (null: nothing collected).
  struct MoeStats* moe_stats = nullptr;
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
};

}  // namespace mt
