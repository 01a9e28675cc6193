// GPT-2 forward and backward for the part of the model one rank holds (its
// pipeline stage and tensor-parallel shard). Weights are views into the flat
// parameter (or gradient) buffer, bound by name from the ParamRegistry; what
// backward needs is saved in a GptActivations record that the caller owns, one
// per micro-batch in flight; scratch lives in a GptWorkspace reused by all.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "core/arena.h"
#include "model/blocks/transformer_layer.h"
#include "model/gpt_shapes.h"
#include "model/micro_batch.h"
#include "model/mtp.h"
#include "model/params.h"

namespace mt {

template <class P>
struct GptParams {
  P wte{};    // (v/tp, h)   word embedding
  P wpe{};    // (max_pos, h) learned positions only
  std::vector<LayerParams<P>> layers;  // this stage's layers
  NormParams<P> lnf;  // decoder.final_layernorm
  P out{};    // (v/tp, h)   output layer: wte when tied
  std::vector<MtpParams<P>> mtp;  // the MTP depths (with the output; model/mtp.h)
};

using LayerWeights = LayerParams<ReadView>;
using LayerGrads = LayerParams<float*>;
using GptWeights = GptParams<ReadView>;
using GptGrads = GptParams<float*>;

// Views of the registry's parameters in `base` (the value buffer, fp32 or
// bf16) or `grads` (the fp32 gradient buffer): of model chunk `chunk`
// (virtual pipeline stage) of this rank, or of the whole stage when it has one chunk.
// kept32: parameters bound to fp32 copies instead (registry offset -> the
// copy; ModelRuntime's expert biases in bf16 runs).
GptWeights bind_chunk_weights(const ParamRegistry& reg, ReadView base, int chunk,
                              const std::vector<int64_t>* placement = nullptr,
                              const std::map<int64_t, const float*>* kept32 = nullptr);
GptWeights bind_weights(const ParamRegistry& reg, ReadView base);
// placement: parameter i's gradient at grads + placement[i] instead of its
// registry offset (a staging pool smaller than the model, optim/staged_grads.h).
GptGrads bind_chunk_grads(const ParamRegistry& reg, float* grads, int chunk,
                          const std::vector<int64_t>* placement = nullptr);

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
  TokenDocuments docs;           // positions: host_positions when reset; doc_start: the input's
  // Host memory: ids, positions and labels (s, b) are made here, then copied
  // to the record's device (a plain copy on the CPU); the losses come back here.
  std::vector<int32_t> host_ids, host_positions, host_labels;
  std::vector<float> host_losses;
  std::vector<float> host_loss_scale;  // (s, b) the loss mask's gradient factors (--eod-mask-loss)
  MtpActivations mtp;  // the MTP depths' records (model/mtp.h)
};

// Scratch shared by every micro-batch and layer.
struct GptWorkspace {
  float* hbuf = nullptr;      // (s_local, b, h) a block's output, then its gradient;
                              // in the loss head the final norm's output (read only in forward)
  float* full_a = nullptr;    // (s, b, h)  SP all-gathers, row-parallel partial sums
  float* full_b = nullptr;    // (s, b, h)  SP input-gradient before its reduce-scatter
  float* logits = nullptr;    // (s, b, v/tp) logits, then (fp32 math) their gradient, in place
  uint16_t* dlogits16 = nullptr;  // bf16 math: (s, b, v/tp) the logits' gradient, in bf16
  float* ce_max = nullptr;    // (s, b)     vocab-parallel cross-entropy scratch
  double* ce_sum = nullptr;   // (s, b)
  double* ce_target = nullptr;  // (s, b)
  float* dres = nullptr;      // (s_local, b, h) gradient of the residual stream
  float* dln = nullptr;       // (s_local, b, h) gradient of a norm's output
  LayerWorkspace layer;       // the blocks' scratch
  MtpWorkspace mtp;           // the MTP depths' scratch
};

// The layer records of one GptActivations: the specs of the layers whose
// records are kept, of the scratch records the recomputed layers share (one
// per place in a group and spec), and each layer's scratch record (-1: its own).
// carve_activations carves these; the memory formula (memory/memory_report.cc) counts them.
struct LayerRecords {
  std::vector<LayerSpec> kept, scratch;
  std::vector<int64_t> scratch_of;  // (num_layers)
};
LayerRecords layer_records(const GptShapes& sh);
GptActivations carve_activations(Arena& arena, const GptShapes& sh);
GptWorkspace carve_workspace(Arena& arena, const GptShapes& sh);

// Forward of this stage for one micro-batch `mb` (kept by the caller until
// its backward). First stage: its tokens (b, s) row-major as the dataset
// gives them (else the caller has filled act.hidden[0]). Last stage: its
// labels (b, s); returns the sum of token losses (with a loss mask, of the
// counted ones), and in training also accumulates the output layer's weight
// gradient into `grads` and leaves the gradient of the final norm's output in
// act.dlnf.
double gpt_forward(const GptWeights& w, const GptGrads* grads, GptActivations& act,
                   GptWorkspace& ws, const GptShapes& sh, const MicroBatchInput& mb,
                   const PassContext& ctx);
// Backward of this stage; parameter gradients accumulate (+=) into `grads`.
// Leaves the gradient of the stage input in ws.dres (sent to the previous stage).
void gpt_backward(const GptWeights& w, const GptGrads& grads, GptActivations& act,
                  GptWorkspace& ws, const GptShapes& sh, const PassContext& ctx);

// The MTP depths of the last stage (model/mtp_pass.cc), in training only.
// Forward, after the main loss head (whose final norm's output is still in
// ws.hbuf): every depth and its fused output-layer backward; adds each
// depth's token-mean loss to ctx.mtp_stats. Backward, before the main final
// norm's: the depths' gradients, the shared word embedding's (+=), and the
// gradient of h_0 added to act.dlnf.
void mtp_forward(const GptWeights& w, const GptGrads* grads, GptActivations& act,
                 GptWorkspace& ws, const GptShapes& sh, const MicroBatchInput& mb,
                 const PassContext& ctx);
void mtp_backward(const GptWeights& w, const GptGrads& grads, GptActivations& act,
                  GptWorkspace& ws, const GptShapes& sh, const PassContext& ctx);

// One transformer layer (gpt_layer.cc): its blocks by its spec, each followed
// by the residual's dropout-add.
void layer_forward(const LayerWeights& w, LayerActivations& act, GptWorkspace& ws,
                   const GptShapes& sh, int64_t layer, int64_t sample0, const TokenDocuments& docs,
                   const PassContext& ctx);
// In: ws.dres = d output. Out: ws.dres = d input. Weight gradients +=.
void layer_backward(const LayerWeights& w, const LayerGrads& g, LayerActivations& act,
                    GptWorkspace& ws, const GptShapes& sh, int64_t layer, int64_t sample0,
                    const TokenDocuments& docs, const PassContext& ctx);

}  // namespace mt
