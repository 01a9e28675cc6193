// One transformer layer as a composition of blocks by its LayerSpec:
// input_layernorm → self_attention → (dropout-add) → pre_mlp_layernorm → mlp
// → (dropout-add). Its parameters, activation record, workspace, memory
// formula and FLOP count are those of its blocks, put together here; forward
// and backward are in model/gpt_layer.cc. A new block (an MoE MLP) adds its
// fields and one case per function below, nothing outside src/model/blocks.
#pragma once
#include <cstdint>
#include <string>

#include "model/blocks/attention_block.h"
#include "model/blocks/layer_spec.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"
#include "model/blocks/norm_block.h"

namespace mt {

// The parameters of one layer as views of type P: ReadView for the weights
// the kernels read (fp32, or bf16 in bf16 runs), float* for their fp32
// gradients. Biases are null without them (--disable-bias-linear; RMSNorm has none).
template <class P>
struct LayerParams {
  LayerSpec spec;
  NormParams<P> ln1;            // input_layernorm
  AttentionParams<P> attention; // self_attention
  NormParams<P> ln2;            // pre_mlp_layernorm
  MlpParams<P> mlp;             // mlp (MlpKind::kDense)
  MoeParams<P> moe;             // mlp (MlpKind::kMoe)
};

// Saved activations of one layer, stored as the run computes: fp32, or bf16
// in bf16 runs (Megatron's bf16 activations); statistics (norm mean/rstd,
// softmax log-sum-exp) stay fp32. Shapes with s_local rows are sequence slabs
// under SP (= s otherwise).
struct LayerActivations {
  WriteView input;            // (s_local, b, h) residual stream in (= previous layer's output)
  NormRecord ln1;             // its out is the attention's input
  AttentionRecord attention;
  WriteView mid;              // (s_local, b, h) residual after attention
  NormRecord ln2;             // its out is the MLP's input
  MlpRecord mlp;              // MlpKind::kDense
  MoeRecord moe;              // MlpKind::kMoe
  WriteView output;           // (s_local, b, h) residual stream out
};

// The blocks' scratch, shared by every layer and micro-batch.
struct LayerWorkspace {
  AttentionWorkspace attention;
  MlpWorkspace mlp;
  MoeWorkspace moe;  // carved when the model has MoE layers
};

// Adds layer `layer`'s parameters to the registry, block by block, in the
// order of Megatron core's names (checkpoints depend on it).
void layer_param_specs(ParamRegistry& reg, int64_t layer);

template <class P>
LayerParams<P> bind_layer(const ParamBinder<P>& bind, int64_t layer) {
  const std::string p = layer_prefix(layer);
  LayerParams<P> lw;
  lw.spec = layer_spec(bind.reg.config(), layer);
  lw.ln1 = bind_norm(bind, p + "input_layernorm");
  lw.attention = bind_attention(bind, p + "self_attention.");
  lw.ln2 = bind_norm(bind, p + "pre_mlp_layernorm");
  if (lw.spec.mlp == MlpKind::kMoe)
    lw.moe = bind_moe(bind, p + "mlp.");
  else
    lw.mlp = bind_mlp(bind, p + "mlp.");
  return lw;
}

// The record of a layer without its input/output (rows of the stage's
// residual-stream buffer, set by the caller).
LayerActivations carve_layer_record(Arena& arena, const GptShapes& sh, const LayerSpec& spec);
LayerWorkspace carve_layer_workspace(Arena& arena, const GptShapes& sh);
// Bytes of one layer's record (without its input) and of the LayerWorkspace:
// the sums over its blocks, plus the residual after attention (mid).
double layer_record_bytes(const BlockSizes& z, const LayerSpec& spec);
double layer_workspace_bytes(const BlockSizes& z);
// Training FLOPs of global layer `layer` over `tokens` tokens: the sum over its blocks.
double layer_flops(const ModelConfig& c, int64_t layer, double tokens);

}  // namespace mt
