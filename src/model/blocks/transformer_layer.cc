#include "model/blocks/transformer_layer.h"

namespace mt {

WriteView alloc_act(Arena& arena, const GptShapes& sh, int64_t n) {
  if (sh.cm.math == MathMode::kBF16)
    return static_cast<uint16_t*>(arena.alloc(DType::kBF16, {n}).data);
  return arena.alloc_f32(n);
}

void layer_param_specs(ParamRegistry& reg, int64_t layer) {
  layer_param_specs_at(reg, layer_prefix(layer), layer_spec(reg.config(), layer));
}

void layer_param_specs_at(ParamRegistry& reg, const std::string& p, const LayerSpec& spec) {
  norm_param_specs(reg, p + "input_layernorm");
  with_kind<AttentionKinds>(spec.attention, [&](auto k) {
    decltype(k)::type::param_specs(reg, p + "self_attention.");
  });
  norm_param_specs(reg, p + "pre_mlp_layernorm");
  with_kind<MlpKinds>(spec.mlp, [&](auto k) { decltype(k)::type::param_specs(reg, p + "mlp."); });
}

LayerActivations carve_layer_record(Arena& arena, const GptShapes& sh, const LayerSpec& spec) {
  LayerActivations la;
  la.ln1 = carve_norm_record(arena, sh, !spec.recompute_norms);
  with_kind<AttentionKinds>(spec.attention, [&](auto k) {
    la.attention.emplace<k.index>(decltype(k)::type::carve_record(arena, sh, spec)).in =
        la.ln1.out;
  });
  la.mid = alloc_act(arena, sh, sh.local_tokens() * sh.h);
  la.ln2 = carve_norm_record(arena, sh, !spec.recompute_norms);
  la.recompute_mlp = spec.recompute_mlp;
  la.recompute_norms = spec.recompute_norms;
  with_kind<MlpKinds>(spec.mlp, [&](auto k) {
    if (spec.recompute_mlp)
      la.mlp.emplace<k.index>();  // the workspace's record serves it
    else
      la.mlp.emplace<k.index>(decltype(k)::type::carve_record(arena, sh, spec)).in = la.ln2.out;
  });
  return la;
}

LayerWorkspace carve_layer_workspace(Arena& arena, const GptShapes& sh) {
  LayerWorkspace ws;
  for_each_kind<AttentionKinds>([&](auto k) {
    if (specs_take(sh.layer_specs, &LayerSpec::attention, k.index))
      std::get<k.index>(ws.attention) = decltype(k)::type::carve_workspace(arena, sh);
  });
  for_each_kind<MlpKinds>([&](auto k) {
    if (specs_take(sh.layer_specs, &LayerSpec::mlp, k.index))
      std::get<k.index>(ws.mlp) = decltype(k)::type::carve_workspace(arena, sh);
    if (specs_recompute_mlp(sh.layer_specs, k.index))
      // the whole slot's record (mark_recomputed leaves no partial flag with it)
      std::get<k.index>(ws.mlp_recompute) = decltype(k)::type::carve_record(arena, sh, LayerSpec{});
  });
  if (specs_recompute_norms(sh.layer_specs)) ws.norm_out = alloc_act(arena, sh, sh.local_tokens() * sh.h);
  return ws;
}

double layer_record_bytes(const BlockSizes& z, const LayerSpec& spec) {
  double attention = 0, mlp = 0;
  with_kind<AttentionKinds>(spec.attention,
                            [&](auto k) { attention = decltype(k)::type::record_bytes(z, spec); });
  if (!spec.recompute_mlp)
    with_kind<MlpKinds>(spec.mlp, [&](auto k) { mlp = decltype(k)::type::record_bytes(z, spec); });
  const double mid = z.e * z.nl * z.h;
  const bool out = !spec.recompute_norms;
  return norm_record_bytes(z, out) + attention + mid + norm_record_bytes(z, out) + mlp;
}

double layer_workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>& specs) {
  double bytes = 0;
  for_each_kind<AttentionKinds>([&](auto k) {
    if (specs_take(specs, &LayerSpec::attention, k.index))
      bytes += decltype(k)::type::workspace_bytes(z, specs);
  });
  for_each_kind<MlpKinds>([&](auto k) {
    if (specs_take(specs, &LayerSpec::mlp, k.index))
      bytes += decltype(k)::type::workspace_bytes(z, specs);
    if (specs_recompute_mlp(specs, k.index)) bytes += decltype(k)::type::record_bytes(z, LayerSpec{});
  });
  if (specs_recompute_norms(specs)) bytes += z.e * z.nl * z.h;
  return bytes;
}

double layer_flops(const ModelConfig& c, int64_t layer, double tokens) {
  const LayerSpec spec = layer_spec(c, layer);
  double flops = 0;
  with_kind<AttentionKinds>(spec.attention,
                            [&](auto k) { flops += decltype(k)::type::flops(c, tokens); });
  with_kind<MlpKinds>(spec.mlp, [&](auto k) { flops += decltype(k)::type::flops(c, tokens); });
  return flops;
}

}  // namespace mt
