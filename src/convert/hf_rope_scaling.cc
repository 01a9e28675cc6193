#include "convert/hf_rope_scaling.h"

#include "convert/hf_keys.h"
#include "core/error.h"

namespace mt {

using nlohmann::json;
using namespace hf_keys;

namespace {

// The llama3 object `r` (found under `key`) into m; every value required.
void read_llama3(const json& r, const std::string& path, const char* key, ModelConfig& m) {
  const std::string where = path + " " + key;
  for (const char* k : {"factor", "low_freq_factor", "high_freq_factor",
                        "original_max_position_embeddings"})
    MT_CHECK(present(r, k), where, ": rope_type llama3 has no '", k,
             "'; fix: correct config.json (Llama 3.1 has factor 8.0, low_freq_factor 1.0, "
             "high_freq_factor 4.0, original_max_position_embeddings 8192)");
  m.use_rope_scaling = true;
  m.rope_scaling_factor = get_positive(r, "factor", where, 8.0, 0, "Llama 3.1 uses 8.0");
  m.rope_scaling_low_freq_factor =
      get_positive(r, "low_freq_factor", where, 1.0, 0, "Llama 3.x uses 1.0");
  m.rope_scaling_high_freq_factor =
      get_positive(r, "high_freq_factor", where, 4.0, 0, "Llama 3.x uses 4.0");
  m.rope_scaling_original_max_position_embeddings =
      get_int(r, "original_max_position_embeddings", where, 8192, true, kMaxPositions);
  MT_CHECK(m.rope_scaling_factor >= 1.f, where, ": 'factor' is ", shown(r.at("factor")),
           ", below 1 (Hugging Face refuses it too); fix: correct config.json (Llama 3.1 uses 8.0)");
  MT_CHECK(m.rope_scaling_high_freq_factor > m.rope_scaling_low_freq_factor, where,
           ": 'high_freq_factor' ", shown(r.at("high_freq_factor")),
           " is not above 'low_freq_factor' ", shown(r.at("low_freq_factor")),
           "; fix: correct config.json (Llama 3.x uses 4.0 and 1.0)");
}

// The type of a rope_scaling / rope_parameters object ("rope_type", or the
// older "type"); "default" when it names none.
std::string type_of(const json& r, const std::string& path, const char* key) {
  MT_CHECK(r.is_object(), path, ": '", key, "' is ", shown(r), ", not an object or null",
           kFixFile);
  if (present(r, "rope_type")) return get_string(r, "rope_type", path + " " + key, "default");
  return get_string(r, "type", path + " " + key, "default");
}

}  // namespace

void rope_scaling_from_hf(const json& c, const std::string& path, bool llama3_allowed,
                          ModelConfig& m) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!present(c, key)) continue;
    const json& r = c.at(key);
    const std::string type = type_of(r, path, key);
    if (type == "llama3" && llama3_allowed) {
      read_llama3(r, path, key, m);
    } else if (type != "default" || std::string(key) == "rope_scaling") {
      unsupported(path, key, r,
                  llama3_allowed
                      ? "megatron.cpp computes plain RoPE or Llama 3.1's scaling (rope_type "
                        "llama3); '" + type + "' is not built"
                      : std::string("megatron.cpp computes plain RoPE for this family (no scaled "
                                    "or extended positions)"));
    }
    if (std::string(key) == "rope_parameters" && !present(c, "rope_theta"))
      m.rotary_base = get_positive(r, "rope_theta", path + " rope_parameters", m.rotary_base, 1,
                                   "Llama 3 uses 500000");
  }
}

json rope_scaling_to_hf(const ModelConfig& c) {
  if (!c.use_rope_scaling) return nullptr;
  return {{"rope_type", "llama3"},
          {"factor", tidy(c.rope_scaling_factor)},
          {"low_freq_factor", tidy(c.rope_scaling_low_freq_factor)},
          {"high_freq_factor", tidy(c.rope_scaling_high_freq_factor)},
          {"original_max_position_embeddings", c.rope_scaling_original_max_position_embeddings}};
}

}  // namespace mt
