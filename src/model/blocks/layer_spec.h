// Which block fills each place of a transformer layer, chosen per layer from
// the ModelConfig (Megatron core's ModuleSpec: TransformerLayerSubmodules'
// input_layernorm, self_attention, pre_mlp_layernorm, mlp). The norm's kind
// (LayerNorm or RMSNorm) and the attention's variants (RoPE, query groups,
// biases) are configuration of one block each (GptShapes); the MLP is a choice
// of block: dense, or MoE (router, experts, token dispatcher) where
// --num-experts and --moe-layer-freq say so.
#pragma once
#include <cstdint>

#include "model/config.h"

namespace mt {

enum class MlpKind : uint8_t { kDense, kMoe };

struct LayerSpec {
  MlpKind mlp = MlpKind::kDense;
};

// The spec of global layer `layer` of a model configured by `c`.
inline LayerSpec layer_spec(const ModelConfig& c, int64_t layer) {
  return LayerSpec{c.is_moe_layer(layer) ? MlpKind::kMoe : MlpKind::kDense};
}

}  // namespace mt
