// GPT-2 forward and backward for the part of the model one rank holds (its
// pipeline stage and tensor-parallel shard). Weights are views into the flat
// parameter (or gradient) buffer, bound by name from the ParamRegistry; what
// backward needs is saved in a GptActivations record that the caller owns, one
// per micro-batch in flight; scratch lives in a GptWorkspace reused by all.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <memory>

#include "core/arena.h"
#include "kernels/precision.h"
#include "kernels/rope.h"
#include "model/params.h"
#include "parallel/context_parallel.h"
#include "parallel/tensor_parallel_linear.h"

namespace mt {

// The parameters of one layer as views of type P: ReadView for the weights
// the kernels read (fp32, or bf16 in bf16 runs), float* for their fp32
// gradients. Biases are null without them (--disable-bias-linear; RMSNorm has none).
template <class P>
struct LayerParams {
  P ln1_w{};   // (h)
  P ln1_b{};   // (h)
  P qkv_w{};   // ((a + 2g)·d/tp, h)   rows: (g_local, a/g + 2, d)
  P qkv_b{};   // ((a + 2g)·d/tp)
  P proj_w{};  // (h, h/tp)
  P proj_b{};  // (h)
  P ln2_w{};   // (h)
  P ln2_b{};   // (h)
  P fc1_w{};   // (f/tp, h), SwiGLU: ([gate; up] 2f/tp, h)
  P fc1_b{};   // (f/tp) or (2f/tp)
  P fc2_w{};   // (h, f/tp)
  P fc2_b{};   // (h)
};

template <class P>
struct GptParams {
  P wte{};    // (v/tp, h)   word embedding
  P wpe{};    // (max_pos, h) learned positions only
  std::vector<LayerParams<P>> layers;  // this stage's layers
  P lnf_w{};  // (h)
  P lnf_b{};  // (h)
  P out{};    // (v/tp, h)   output layer: wte when tied
};

using LayerWeights = LayerParams<ReadView>;
using LayerGrads = LayerParams<float*>;
using GptWeights = GptParams<ReadView>;
using GptGrads = GptParams<float*>;

// Views of the registry's parameters in `base` (the value buffer, fp32 or
// bf16) or `grads` (the fp32 gradient buffer): of model chunk `chunk`
// (virtual pipeline stage) of this rank, or of the whole stage when it has one chunk.
GptWeights bind_chunk_weights(const ParamRegistry& reg, ReadView base, int chunk);
GptWeights bind_weights(const ParamRegistry& reg, ReadView base);
GptGrads bind_chunk_grads(const ParamRegistry& reg, float* grads, int chunk);

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
GptShapes make_shapes(const ParamRegistry& reg, int64_t micro_batch,
                      const TensorParallel& tp = TensorParallel{}, int chunk = 0,
                      const ContextParallel& cp = ContextParallel{}, int64_t rope_positions = 0);

// Megatron's --recompute-method over this chunk's layers: "uniform" makes
// groups of `num_layers` consecutive layers, "block" recomputes the first
// `num_layers` layers one by one; "" (or num_layers 0) recomputes nothing.
void set_full_recompute(GptShapes& sh, const std::string& method, int64_t num_layers);

// Saved activations are stored as the run computes: fp32, or bf16 in bf16
// runs (Megatron's bf16 activations: the residual stream, norm outputs, q, k,
// v, the projection and FC inputs); statistics (norm mean/rstd, softmax
// log-sum-exp) and the per-token losses stay fp32.
struct LayerActivations {
  // Shapes with s_local rows are sequence slabs under SP (= s otherwise).
  WriteView input;            // (s_local, b, h)  residual stream in (= previous layer's output)
  WriteView ln1;              // (s_local, b, h)
  float* ln1_mean = nullptr;  // (s_local, b)   LayerNorm only
  float* ln1_rstd = nullptr;  // (s_local, b)
  WriteView q;                // (b, a, s, d)   after RoPE
  WriteView k;                // (b, a, s, d)   after RoPE, repeated for a group's heads
  WriteView v;                // (b, a, s, d)
  float* ctx = nullptr;       // (b, a, s, d)  attention output; fp32 runs only (bf16:
                              //               workspace, the bf16 backward does not read it)
  float* lse = nullptr;       // (b, a, s)     softmax log-sum-exp
  WriteView ctx_sbh;          // (s, b, a·d)   projection input
  WriteView mid;              // (s_local, b, h) residual after attention
  WriteView ln2;              // (s_local, b, h)
  float* ln2_mean = nullptr;  // (s_local, b)   LayerNorm only
  float* ln2_rstd = nullptr;  // (s_local, b)
  WriteView fc1;              // (s, b, f_in)  before the activation
  WriteView act;              // (s, b, f)     GELU or SwiGLU output
  WriteView output;           // (s_local, b, h) residual stream out
};

// Everything backward needs for one micro-batch.
struct GptActivations {
  int32_t* ids = nullptr;        // (s, b) token ids, sequence-first
  int32_t* positions = nullptr;  // (s, b)
  int32_t* labels = nullptr;     // (s, b)
  // (max(L_local + 1, 2), s_local, b, h) residual stream at layer boundaries
  // (bf16 runs: at least two rows, whose bytes hold one fp32 boundary: the
  // input gradient a pipeline stage sends back).
  WriteView hidden;
  std::vector<LayerActivations> layers;
  float* lnf_mean = nullptr;     // (s_local, b)
  float* lnf_rstd = nullptr;     // (s_local, b)
  float* dlnf = nullptr;         // (s_local, b, h) gradient of lnf, computed in forward (fused loss head)
  float* losses = nullptr;       // (s, b) per-token loss
  int64_t sample0 = 0;           // global index of the micro-batch's first sample
  // Host memory: ids, positions and labels (s, b) are made here, then copied
  // to the record's device (a plain copy on the CPU); the losses come back here.
  std::vector<int32_t> host_ids, host_positions, host_labels;
  std::vector<float> host_losses;
};

// Scratch shared by every micro-batch and layer.
struct GptWorkspace {
  float* qkv = nullptr;       // (s, b, (a + 2g)·d)
  float* hbuf = nullptr;      // (s_local, b, h) projection / FC2 output, then their gradients;
                              // in the loss head the final norm's output (read only in forward)
  float* full_a = nullptr;    // (s, b, h)  SP all-gathers, row-parallel partial sums
  float* full_b = nullptr;    // (s, b, h)  SP input-gradient before its reduce-scatter
  float* logits = nullptr;    // (s, b, v/tp) logits, then (fp32 math) their gradient, in place
  uint16_t* dlogits16 = nullptr;  // bf16 math: (s, b, v/tp) the logits' gradient, in bf16
  float* ce_max = nullptr;    // (s, b)     vocab-parallel cross-entropy scratch
  double* ce_sum = nullptr;   // (s, b)
  double* ce_target = nullptr;  // (s, b)
  float* attn = nullptr;      // attention_workspace_floats
  float* dres = nullptr;      // (s_local, b, h) gradient of the residual stream
  float* dln = nullptr;       // (s_local, b, h)
  float* dq = nullptr;        // (b, a, s, d)  bf16 forward: fp32 q, k, v before their
  float* dk = nullptr;        // (b, a, s, d)  RoPE and rounding into the record
  float* dv = nullptr;        // (b, a, s, d)
  float* dctx = nullptr;      // (b, a, s, d)  bf16 forward: the attention output (fp32)
  float* dctx_sbh = nullptr;  // (s, b, a·d)
  float* dfc = nullptr;       // (s, b, f)
  float* dfc_in = nullptr;    // (s, b, 2f)    SwiGLU: gradient of [gate | up]
};

GptActivations carve_activations(Arena& arena, const GptShapes& sh);
GptWorkspace carve_workspace(Arena& arena, const GptShapes& sh);

// What a forward/backward pass needs to know about the step.
struct PassContext {
  uint64_t seed = 0;
  int64_t iteration = 0;   // dropout masks are keyed by it
  bool training = true;    // dropout on, loss-head gradient computed
  float grad_scale = 1.f;  // d(total loss)/d(token loss): 1 / tokens averaged over
  // Called in backward when a part's parameter gradients are final (set by the
  // schedule for the last micro-batch only): layer index, total_layers for the
  // final norm, -1 for the embeddings.
  const std::function<void(int64_t)>* grads_ready = nullptr;
  // Called in forward just before a part's parameters are first read, with
  // the same part numbers (the output layer asks for -1 too: it is the tied
  // word embedding). Set by the distributed optimizer with
  // --overlap-param-gather, to wait for that part's parameter all-gather.
  const std::function<void(int64_t)>* params_needed = nullptr;
};

// Forward of this stage for one micro-batch. First stage: `tokens` (b, s) row-major
// as the dataset gives them (else the caller has filled act.hidden[0]). Last
// stage: `labels` (b, s); returns the sum of token losses, and in training also
// accumulates the output layer's weight gradient into `grads` and leaves the
// gradient of the final norm's output in act.dlnf.
double gpt_forward(const GptWeights& w, const GptGrads* grads, GptActivations& act,
                   GptWorkspace& ws, const GptShapes& sh, const int32_t* tokens,
                   const int32_t* labels, const PassContext& ctx);
// Backward of this stage; parameter gradients accumulate (+=) into `grads`.
// Leaves the gradient of the stage input in ws.dres (sent to the previous stage).
void gpt_backward(const GptWeights& w, const GptGrads& grads, GptActivations& act,
                  GptWorkspace& ws, const GptShapes& sh, const PassContext& ctx);

// The configured norm over rows of h (LayerNorm, or RMSNorm, which has no
// mean or bias): out =, rstd (and mean) =; backward: din +=, dw (and db) +=.
void norm_forward(const GptShapes& sh, WriteView out, float* mean, float* rstd, ReadView in,
                  ReadView w, ReadView b, int64_t rows);
void norm_backward(const GptShapes& sh, float* din, float* dw, float* db, const float* dout,
                   ReadView in, ReadView w, const float* mean, const float* rstd,
                   int64_t rows);

// The MLP's nonlinearity over n tokens: GELU of fc1 (n, f), or SwiGLU of
// fc1 (n, 2f) = [gate | up]; act (n, f) =.
void mlp_activation_forward(const GptShapes& sh, WriteView act, ReadView fc1, int64_t n);

// One transformer layer (gpt_layer.cc).
void layer_forward(const LayerWeights& w, LayerActivations& act, GptWorkspace& ws,
                   const GptShapes& sh, int64_t layer, int64_t sample0, const PassContext& ctx);
// In: ws.dres = d output. Out: ws.dres = d input. Weight gradients +=.
void layer_backward(const LayerWeights& w, const LayerGrads& g, const LayerActivations& act,
                    GptWorkspace& ws, const GptShapes& sh, int64_t layer, int64_t sample0,
                    const PassContext& ctx);

}  // namespace mt
