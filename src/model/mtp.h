// Multi-token prediction (Megatron core's MultiTokenPredictionBlock,
// DeepSeek-V3): D depths on the last pipeline stage after the main loss head.
// Depth k (1-based) takes the previous depth's output h_{k-1} (depth 0: the
// decoder's output after its final norm, as Megatron's TransformerBlock hands
// it over) and the word embedding of the input tokens shifted left by k, norms
// each (hnorm, enorm), projects [enorm(e) | hnorm(h)] from 2h to h (eh_proj: a
// column-parallel linear whose output is gathered over TP, then scattered to
// the sequence-parallel slab), runs one transformer layer of the last decoder
// layer's blocks, its own final norm (h_k), the output layer shared with the
// main model and a cross-entropy against the labels shifted by k (positions
// past the end masked, the loss mask shifted too: Megatron's roll_tensor).
// Its loss, the mean over the depths times --mtp-loss-scaling-factor, adds to
// the main loss's gradient; each depth's token-mean is logged ("mtp_k loss").
// As the main head, each depth's output-layer backward runs in forward; the
// rest runs in gpt_backward before the final norm's backward, adding the
// gradient of h_0 to the main head's. Parameters: mtp.layers.<k-1>.{enorm,
// hnorm, eh_proj, transformer_layer.*, final_layernorm}, part of the loss head.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/blocks/transformer_layer.h"
#include "model/micro_batch.h"

namespace mt {

std::string mtp_prefix(int64_t depth);  // "mtp.layers.<depth>." (depth 0-based)
// The blocks of every depth's layer: the last decoder layer's (Megatron's
// get_gpt_mtp_block_spec takes decoder_specs[-1]).
LayerSpec mtp_layer_spec(const ModelConfig& c);

template <class P>
struct MtpParams {
  NormParams<P> enorm, hnorm;  // of the shifted embedding, of the previous depth's output
  P eh_proj{};                 // (h/tp, 2h) column-parallel over [enorm | hnorm]
  LayerParams<P> layer;        // transformer_layer
  NormParams<P> final_norm;    // final_layernorm
};

// Adds every depth's parameters, in Megatron core's names and order.
void mtp_param_specs(ParamRegistry& reg);

template <class P>
std::vector<MtpParams<P>> bind_mtp(const ParamBinder<P>& bind) {
  const ModelConfig& c = bind.reg.config();
  std::vector<MtpParams<P>> out;
  for (int64_t d = 0; d < c.mtp_num_layers; ++d) {
    const std::string p = mtp_prefix(d);
    MtpParams<P> m;
    m.enorm = bind_norm(bind, p + "enorm");
    m.hnorm = bind_norm(bind, p + "hnorm");
    m.eh_proj = bind.at(p + "eh_proj.weight");
    m.layer = bind_layer_at(bind, p + "transformer_layer.", mtp_layer_spec(c));
    m.final_norm = bind_norm(bind, p + "final_layernorm");
    out.push_back(std::move(m));
  }
  return out;
}

// What one depth's backward needs, and its data on the host.
struct MtpDepthRecord {
  int32_t* ids = nullptr;     // (s, b) the input tokens shifted by k (0 past the end)
  int32_t* labels = nullptr;  // (s, b) the labels shifted by k
  float* losses = nullptr;    // (s, b) per-token cross-entropy
  WriteView emb;              // (s_local, b, h) the shifted embedding after dropout (enorm's input)
  float* emean = nullptr;     // (s_local, b) enorm statistics (mean: LayerNorm only)
  float* erstd = nullptr;
  WriteView hin;              // (s_local, b, h) hnorm's input: h_{k-1}
  float* hmean = nullptr;
  float* hrstd = nullptr;
  WriteView cat;              // (s_local, b, 2h) [enorm(emb) | hnorm(hin)]: eh_proj's input
  LayerActivations layer;     // input: eh_proj's output; output: the final norm's input
  float* fmean = nullptr;
  float* frstd = nullptr;
  WriteView out;              // (s_local, b, h) h_k, the final norm's output
  float* dout = nullptr;      // (s_local, b, h) d h_k from this depth's loss (fused in forward)
  std::vector<int32_t> host_ids, host_labels;
  std::vector<float> host_losses;
  std::vector<float> host_scale;  // (s, b) each token's gradient factor (mask x weight)
  std::vector<float> host_mask;   // (s, b) the shifted loss mask
};

// The per-depth records of one micro-batch (empty without MTP or off the last stage).
struct MtpActivations {
  std::vector<MtpDepthRecord> depths;
};

// Scratch of the MTP pass, shared by every micro-batch (with SP n = s·b rows
// of the full sequence, nl = n/tp of the slab).
struct MtpWorkspace {
  float* cat_full = nullptr;   // (n, 2h) eh_proj's gathered input
  float* dcat_full = nullptr;  // (n, 2h) its input gradient before the reduce-scatter
  float* dcat = nullptr;       // (nl, 2h) its input gradient
  float* proj = nullptr;       // (n, h/tp) eh_proj's output block, then its gradient
  float* dh = nullptr;         // (nl, h) gradient of a depth's output
  float* carry = nullptr;      // (nl, h) gradient of a depth's input h_{k-1}
};

MtpActivations carve_mtp_record(Arena& arena, const GptShapes& sh);
MtpWorkspace carve_mtp_workspace(Arena& arena, const GptShapes& sh);
// Bytes of one micro-batch's MTP records and of the MTP workspace (the
// memory formula, memory/memory_report.cc); 0 without MTP on this stage.
double mtp_record_bytes(const BlockSizes& z, const LayerSpec& spec, int64_t depths);
double mtp_workspace_bytes(const BlockSizes& z, int64_t depths, int64_t tp);
// Training FLOPs of the MTP depths over `tokens` tokens (Megatron's
// num_floating_point_operations: each depth's layer, norms, eh_proj and logits).
double mtp_flops(const ModelConfig& c, double tokens);

// What the depths of one iteration report (summed over this rank's
// micro-batches; the trainer reduces them).
struct MtpStats {
  // (D) each depth's token-mean loss per micro-batch, summed over the
  // micro-batches (this rank's part of each mean with CP).
  std::vector<double> loss;
  // (D) Megatron's acceptance counts: the counted tokens whose shifted label
  // is the logits' argmax (over the whole padded vocabulary), and the counted tokens.
  std::vector<double> correct, total;
};

// The shifted ids, labels, loss mask and gradient factors of every depth of
// micro-batch `mb` into the record's host arrays (then copied to the device).
// `per_token_loss` and the micro-batch's counted tokens weigh the factors
// as Megatron's process_mtp_loss does.
// counted[k]: the tokens depth k's loss counts in the whole micro-batch
// (every CP rank's part).
void mtp_fill_targets(MtpActivations& rec, const GptShapes& sh, const MicroBatchInput& mb,
                      bool per_token_loss, std::vector<double>& counted);

}  // namespace mt
