// config.json's rope_scaling <-> Llama 3.1's RoPE scaling (--use-rope-scaling
// and its four values; kernels/rope_scaling.h). Hugging Face writes
//   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
//                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
// (older files "type" for "rope_type"; transformers 5 folds it with rope_theta
// into "rope_parameters"). Only llama3 is computed here: linear, dynamic, yarn,
// longrope, ... are refused by file and key, as is any rope_scaling where the
// family takes none.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace mt {

// Reads rope_scaling (and rope_parameters) of config `c` (file `path`) into
// `m`: null or absent leaves plain RoPE; llama3 sets m.use_rope_scaling and
// the four values (all required, checked by key). `llama3_allowed` false (a
// family without it): any rope_scaling is refused. rope_parameters' rope_theta
// becomes m.rotary_base unless rope_theta is given beside it.
void rope_scaling_from_hf(const nlohmann::json& c, const std::string& path, bool llama3_allowed,
                          ModelConfig& m);

// config.json's "rope_scaling" for `c`: null without --use-rope-scaling, else
// the llama3 object above.
nlohmann::json rope_scaling_to_hf(const ModelConfig& c);

}  // namespace mt
