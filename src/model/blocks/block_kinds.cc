#include "model/blocks/block_kinds.h"

#include <algorithm>

namespace mt {

namespace {
// The first kind after the default (index 0) whose applies() picks the layer.
template <class Kinds>
uint8_t pick(const ModelConfig& c, int64_t layer) {
  uint8_t kind = 0;
  for_each_kind<Kinds>([&](auto k) {
    if (k.index > 0 && kind == 0 && decltype(k)::type::applies(c, layer)) kind = uint8_t(k.index);
  });
  return kind;
}
}  // namespace

LayerSpec layer_spec(const ModelConfig& c, int64_t layer) {
  return LayerSpec{pick<AttentionKinds>(c, layer), pick<MlpKinds>(c, layer)};
}

bool model_uses_attention(const ModelConfig& c, size_t index) {
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (layer_spec(c, l).attention == index) return true;
  return false;
}

bool model_uses_mlp(const ModelConfig& c, size_t index) {
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (layer_spec(c, l).mlp == index) return true;
  return false;
}

bool specs_take(const std::vector<LayerSpec>& specs, uint8_t LayerSpec::*member, size_t index) {
  if (specs.empty()) return index == 0;
  for (const LayerSpec& s : specs)
    if (s.*member == index) return true;
  return false;
}

bool specs_recompute_mlp(const std::vector<LayerSpec>& specs, size_t index) {
  for (const LayerSpec& s : specs)
    if (s.mlp == index && s.recompute_mlp) return true;
  return false;
}

bool specs_recompute_norms(const std::vector<LayerSpec>& specs) {
  for (const LayerSpec& s : specs)
    if (s.recompute_norms) return true;
  return false;
}

bool specs_recompute(const std::vector<LayerSpec>& specs, uint8_t LayerSpec::*member,
                     size_t index, bool LayerSpec::*flag) {
  for (const LayerSpec& s : specs)
    if (s.*member == index && s.*flag) return true;
  return false;
}

void mark_recomputed(LayerSpec& spec, const std::vector<std::string>& modules) {
  const auto has = [&](const std::string& m) {
    return std::find(modules.begin(), modules.end(), m) != modules.end();
  };
  with_kind<MlpKinds>(spec.mlp,
                      [&](auto k) { spec.recompute_mlp = has(decltype(k)::type::recompute_module); });
  spec.recompute_norms = has("layernorm");
  spec.recompute_act = has("moe_act") && !spec.recompute_mlp;
  spec.recompute_shared = has("shared_experts") && !spec.recompute_mlp;
  spec.recompute_up_proj = has("mla_up_proj");
}

std::shared_ptr<const KindShapes> make_kind_shapes(const ModelConfig& c, const StageLayout& st,
                                                   const GptShapes& sh, const Communicator* ep) {
  auto s = std::make_shared<KindShapes>();
  for_each_kind<AttentionKinds>([&](auto k) {
    if (model_uses_attention(c, k.index))
      std::get<k.index>(s->attention) = decltype(k)::type::make_shapes(c, st, sh, ep);
  });
  for_each_kind<MlpKinds>([&](auto k) {
    if (model_uses_mlp(c, k.index))
      std::get<k.index>(s->mlp) = decltype(k)::type::make_shapes(c, st, sh, ep);
  });
  return s;
}

}  // namespace mt
