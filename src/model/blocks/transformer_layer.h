// One transformer layer as a composition of blocks by its LayerSpec:
// input_layernorm → self_attention → (dropout-add) → pre_mlp_layernorm → mlp
// → (dropout-add). The attention and MLP slots hold a kind each from the
// registry (model/blocks/block_kinds.h); the layer's parameters, activation
// record, workspace, memory formula and FLOP count are its blocks', put
// together here through the kinds' interface; forward and backward are in
// model/gpt_layer.cc. Nothing here names a kind.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/blocks/block_kinds.h"
#include "model/blocks/norm_block.h"

namespace mt {

// The parameters of one layer as views of type P: ReadView for the weights
// the kernels read (fp32, or bf16 in bf16 runs), float* for their fp32
// gradients. Biases are null without them (--disable-bias-linear; RMSNorm has none).
template <class P>
struct LayerParams {
  LayerSpec spec;
  NormParams<P> ln1;                                  // input_layernorm
  typename AttentionKinds::template Params<P> attention; // self_attention (spec.attention's kind)
  NormParams<P> ln2;                                  // pre_mlp_layernorm
  typename MlpKinds::template Params<P> mlp;          // mlp (spec.mlp's kind)
};

// Saved activations of one layer, stored as the run computes: fp32, or bf16
// in bf16 runs (Megatron's bf16 activations); statistics (norm mean/rstd,
// softmax log-sum-exp) stay fp32. Shapes with s_local rows are sequence slabs
// under SP (= s otherwise).
struct LayerActivations {
  WriteView input;            // (s_local, b, h) residual stream in (= previous layer's output)
  NormRecord ln1;             // its out is the attention's input
  AttentionKinds::Record attention;  // of spec.attention's kind
  WriteView mid;              // (s_local, b, h) residual after attention
  NormRecord ln2;             // its out is the MLP's input
  MlpKinds::Record mlp;       // of spec.mlp's kind; uncarved with recompute_mlp
  WriteView output;           // (s_local, b, h) residual stream out
  // The MLP slot is recomputed (LayerSpec::recompute_mlp): its record is the
  // workspace's (LayerWorkspace::mlp_recompute), refilled before its backward.
  bool recompute_mlp = false;
  // The norms' outputs are recomputed (LayerSpec::recompute_norms): ln1.out,
  // ln2.out and their readers' inputs are LayerWorkspace::norm_out, set at
  // each call and refilled before the backward of the block that reads them.
  bool recompute_norms = false;
};

// The blocks' scratch, shared by every layer and micro-batch.
// Each kind's is carved when a layer of the stage takes that kind.
struct LayerWorkspace {
  AttentionKinds::Workspaces attention;
  MlpKinds::Workspaces mlp;
  // The one record of each MLP kind some layer recomputes (selective
  // recompute, LayerSpec::recompute_mlp): written by those layers' forwards
  // and re-run into before each one's backward.
  MlpKinds::Records mlp_recompute;
  // The norms' outputs of the layers that recompute them (recompute_norms).
  WriteView norm_out;
};

// Adds layer `layer`'s parameters to the registry, block by block, in the
// order of Megatron core's names (checkpoints depend on it).
void layer_param_specs(ParamRegistry& reg, int64_t layer);
// The same for a layer of blocks `spec` whose names start with `prefix`
// (an MTP depth's transformer_layer, model/mtp.h).
void layer_param_specs_at(ParamRegistry& reg, const std::string& prefix, const LayerSpec& spec);

template <class P>
LayerParams<P> bind_layer_at(const ParamBinder<P>& bind, const std::string& p,
                             const LayerSpec& spec) {
  LayerParams<P> lw;
  lw.spec = spec;
  lw.ln1 = bind_norm(bind, p + "input_layernorm");
  with_kind<AttentionKinds>(lw.spec.attention, [&](auto k) {
    lw.attention.template emplace<k.index>(decltype(k)::type::bind(bind, p + "self_attention."));
  });
  lw.ln2 = bind_norm(bind, p + "pre_mlp_layernorm");
  with_kind<MlpKinds>(lw.spec.mlp, [&](auto k) {
    lw.mlp.template emplace<k.index>(decltype(k)::type::bind(bind, p + "mlp."));
  });
  return lw;
}

template <class P>
LayerParams<P> bind_layer(const ParamBinder<P>& bind, int64_t layer) {
  return bind_layer_at(bind, layer_prefix(layer), layer_spec(bind.reg.config(), layer));
}

// The record of a layer without its input/output (rows of the stage's
// residual-stream buffer, set by the caller).
LayerActivations carve_layer_record(Arena& arena, const GptShapes& sh, const LayerSpec& spec);
// The stage's: the workspace of each kind its layers (sh.spec) take, and one
// record of each MLP kind a layer recomputes.
LayerWorkspace carve_layer_workspace(Arena& arena, const GptShapes& sh);
// Bytes of one layer's record (without its input) and of the LayerWorkspace
// of a stage whose layers take the kinds of `specs`: the sums over the
// blocks, plus the residual after attention (mid); a recomputed MLP slot's
// record counts once, in the workspace, not in each layer's record, and so do
// recomputed norm outputs.
double layer_record_bytes(const BlockSizes& z, const LayerSpec& spec);
double layer_workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>& specs);
// Training FLOPs of global layer `layer` over `tokens` tokens: the sum over its blocks.
double layer_flops(const ModelConfig& c, int64_t layer, double tokens);

}  // namespace mt
