#include "convert/hf_mistral.h"

#include "convert/hf_keys.h"
#include "core/error.h"

namespace mt {

using nlohmann::json;
using namespace hf_keys;

std::string window_size_from_hf(const json& c, const char* key, const std::string& path,
                                int64_t fallback) {
  int64_t w = fallback;
  if (c.contains(key)) w = c.at(key).is_null() ? 0 : get_int(c, key, path, 0, true, kMaxPositions);
  return w > 0 ? std::to_string(w - 1) + ",0" : "";
}

json hf_sliding_window(const ModelConfig& c) {
  return c.window_left() >= 0 ? json(c.window_left() + 1) : json(nullptr);
}

void mistral_config_from_hf(const json& c, const std::string& path, ModelConfig& m) {
  m.window_size = window_size_from_hf(c, "sliding_window", path, 4096);  // MistralConfig's default
  if (present(c, "layer_types"))
    unsupported(path, "layer_types", c.at("layer_types"),
                "MistralForCausalLM applies sliding_window to every layer; per-layer types are "
                "Ministral's (not converted)");
}

void mistral_config_to_hf(const ModelConfig& c, json& j) {
  for (const char* key : {"rope_scaling", "attention_bias", "mlp_bias", "pretraining_tp"})
    j.erase(key);
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["sliding_window"] = hf_sliding_window(c);
}

}  // namespace mt
