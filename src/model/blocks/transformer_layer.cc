#include "model/blocks/transformer_layer.h"

namespace mt {

WriteView alloc_act(Arena& arena, const GptShapes& sh, int64_t n) {
  if (sh.cm.math == MathMode::kBF16)
    return static_cast<uint16_t*>(arena.alloc(DType::kBF16, {n}).data);
  return arena.alloc_f32(n);
}

void layer_param_specs(ParamRegistry& reg, int64_t layer) {
  const std::string p = layer_prefix(layer);
  norm_param_specs(reg, p + "input_layernorm");
  attention_param_specs(reg, p + "self_attention.");
  norm_param_specs(reg, p + "pre_mlp_layernorm");
  if (layer_spec(reg.config(), layer).mlp == MlpKind::kMoe)
    moe_param_specs(reg, p + "mlp.");
  else
    mlp_param_specs(reg, p + "mlp.");
}

LayerActivations carve_layer_record(Arena& arena, const GptShapes& sh, const LayerSpec& spec) {
  LayerActivations la;
  la.ln1 = carve_norm_record(arena, sh);
  la.attention = carve_attention_record(arena, sh);
  la.mid = alloc_act(arena, sh, sh.local_tokens() * sh.h);
  la.ln2 = carve_norm_record(arena, sh);
  if (spec.mlp == MlpKind::kMoe) {
    la.moe = carve_moe_record(arena, sh);
    la.moe.in = la.ln2.out;
  } else {
    la.mlp = carve_mlp_record(arena, sh);
    la.mlp.in = la.ln2.out;
  }
  la.attention.in = la.ln1.out;
  return la;
}

LayerWorkspace carve_layer_workspace(Arena& arena, const GptShapes& sh) {
  LayerWorkspace ws;
  ws.attention = carve_attention_workspace(arena, sh);
  ws.mlp = carve_mlp_workspace(arena, sh);
  if (sh.moe.experts > 0) ws.moe = carve_moe_workspace(arena, sh);
  return ws;
}

double layer_record_bytes(const BlockSizes& z, const LayerSpec& spec) {
  const double mid = z.e * z.nl * z.h;
  const double mlp = spec.mlp == MlpKind::kMoe ? z.moe_record : mlp_record_bytes(z);
  return norm_record_bytes(z) + attention_record_bytes(z) + mid + norm_record_bytes(z) + mlp;
}

double layer_workspace_bytes(const BlockSizes& z) {
  return attention_workspace_bytes(z) + mlp_workspace_bytes(z) + z.moe_workspace;
}

double layer_flops(const ModelConfig& c, int64_t layer, double tokens) {
  const double mlp = layer_spec(c, layer).mlp == MlpKind::kMoe ? moe_flops(c, tokens)
                                                                : mlp_flops(c, tokens);
  return attention_flops(c, tokens) + mlp;
}

}  // namespace mt
