// Which kind of block fills each slot of a transformer layer (Megatron core's
// ModuleSpec: TransformerLayerSubmodules' self_attention and mlp), as the
// kind's index in its slot's registry (model/blocks/block_kinds.h). The norms
// (LayerNorm or RMSNorm) are configuration of the one norm block.
// recompute_mlp: Megatron's selective recompute of the MLP slot (its kind's
// recompute_module, "mlp" or "moe", in --recompute-modules): the layer keeps
// the slot's input only and re-runs the block's forward before its backward,
// into one record in the layer workspace shared by every layer.
// recompute_norms: Megatron's "layernorm" module (input_layernorm and
// pre_mlp_layernorm): the layer keeps the norms' statistics only, their
// outputs live in one layer-workspace buffer and are recomputed before the
// backward of the block that reads them.
// The modules that drop part of one block's record (Megatron's output-
// discarding checkpoints), read by the kinds they concern and ignored by the
// others; a recomputed whole MLP slot (recompute_mlp) subsumes them:
// recompute_act: "moe_act", the experts' activation output (fc1's is kept);
// recompute_shared: "shared_experts", the shared expert's fc1 and activation
// (its input is the MoE block's); recompute_up_proj: "mla_up_proj", MLA's
// per-head q, k, v (the latents and k_pe are kept). Each block redoes them
// before its backward into one buffer of its workspace shared by every layer.
#pragma once
#include <cstdint>

namespace mt {

struct LayerSpec {
  uint8_t attention = 0;  // index in AttentionKinds (0: the default kind)
  uint8_t mlp = 0;        // index in MlpKinds (0: the dense MLP)
  bool recompute_mlp = false;
  bool recompute_norms = false;
  bool recompute_act = false;
  bool recompute_shared = false;
  bool recompute_up_proj = false;
  bool operator==(const LayerSpec& o) const {
    return attention == o.attention && mlp == o.mlp && recompute_mlp == o.recompute_mlp &&
           recompute_norms == o.recompute_norms && recompute_act == o.recompute_act &&
           recompute_shared == o.recompute_shared && recompute_up_proj == o.recompute_up_proj;
  }
  bool operator!=(const LayerSpec& o) const { return !(*this == o); }
};

}  // namespace mt
