// Which kind of block fills each slot of a transformer layer (Megatron core's
// ModuleSpec: TransformerLayerSubmodules' self_attention and mlp), as the
// kind's index in its slot's registry (model/blocks/block_kinds.h). The norms
// (LayerNorm or RMSNorm) are configuration of the one norm block.
// recompute_mlp: Megatron's selective recompute of the MLP slot (its kind's
// recompute_module, "mlp" or "moe", in --recompute-modules): the layer keeps
// the slot's input only and re-runs the block's forward before its backward,
// into one record in the layer workspace shared by every layer.
#pragma once
#include <cstdint>

namespace mt {

struct LayerSpec {
  uint8_t attention = 0;  // index in AttentionKinds (0: the default kind)
  uint8_t mlp = 0;        // index in MlpKinds (0: the dense MLP)
  bool recompute_mlp = false;
  bool operator==(const LayerSpec& o) const {
    return attention == o.attention && mlp == o.mlp && recompute_mlp == o.recompute_mlp;
  }
  bool operator!=(const LayerSpec& o) const { return !(*this == o); }
};

}  // namespace mt
