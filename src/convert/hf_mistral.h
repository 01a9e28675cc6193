// The Mistral adapter (MistralForCausalLM, model_type "mistral") and the
// sliding-window keys every family with one shares (Mistral, Mixtral, Qwen2/3).
//
//   mistral: Llama's block and weight names (RMSNorm, RoPE rope_theta, SwiGLU,
//            grouped-query attention, no biases, tied or untied output), with
//            head_dim (-> --kv-channels when it is not hidden / heads) and
//            sliding_window W -> --window-size W-1,0 (null: none; absent:
//            MistralConfig's default 4096).
//
// Hugging Face's window W keeps key j for query i when j > i - W (masking
// utils' sliding_window_overlay over the causal mask): the query and the W - 1
// keys before it, which is Megatron's / flash-attention's window (W - 1, 0).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace mt {

// config.json's `key` (a window W >= 1, or null) as --window-size ("W-1,0",
// or "" for none); absent: `fallback` (a W, or 0 for none).
std::string window_size_from_hf(const nlohmann::json& c, const char* key, const std::string& path,
                                int64_t fallback);
// c's window as config.json's sliding_window: W = L + 1, or null.
nlohmann::json hf_sliding_window(const ModelConfig& c);

// Adds Mistral's keys to `m`, Llama's configuration of config.json `c`.
void mistral_config_from_hf(const nlohmann::json& c, const std::string& path, ModelConfig& m);
// Turns `j`, Llama's config.json of `c`, into Mistral's.
void mistral_config_to_hf(const ModelConfig& c, nlohmann::json& j);

}  // namespace mt
