// config.json's keys read and checked by name (the helpers every Hugging Face
// family's adapter shares: hf_config.cc, hf_qwen.cc). Each failure is an
// mt::Error naming the file, the key, the value and the fix.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt::hf_keys {

// Upper limits of config.json's sizes: far above any real model (Llama 3
// 405B: hidden 16384, ffn 53248, 126 layers, vocabulary 128256; contexts of
// millions of positions), low enough that every product of them (parameters,
// bytes) fits a 64-bit integer: a damaged or hand-edited file is refused by
// name instead of overflowing or failing in an allocation.
inline constexpr int64_t kMaxHidden = int64_t(1) << 17;     // hidden_size, n_embd
inline constexpr int64_t kMaxFfn = int64_t(1) << 20;        // intermediate_size, n_inner
inline constexpr int64_t kMaxLayers = int64_t(1) << 14;     // num_hidden_layers, n_layer
inline constexpr int64_t kMaxHeads = int64_t(1) << 14;      // attention and key/value heads
inline constexpr int64_t kMaxPositions = int64_t(1) << 24;  // max_position_embeddings, n_positions
inline constexpr int64_t kMaxVocab = int64_t(1) << 24;      // vocab_size
inline constexpr int64_t kMaxExperts = int64_t(1) << 14;    // num_local_experts (DeepSeek-V3: 256)

inline const char* const kFixFile = "; fix: correct config.json (the file is damaged, hand-edited or not "
                             "of this model)";

// A value for messages: scalars as JSON, long objects cut.
std::string shown(const nlohmann::json& v);
// The key is there and not null.
bool present(const nlohmann::json& c, const char* key);
// An integer in [1, max_value]; absent: `fallback`, or an error if `required`.
int64_t get_int(const nlohmann::json& c, const char* key, const std::string& path,
                int64_t fallback, bool required, int64_t max_value);
// A finite number > `above` as a float; `what` says the usual values, for the fix.
float get_positive(const nlohmann::json& c, const char* key, const std::string& path,
                   double fallback, double above, const char* what);
float get_non_negative(const nlohmann::json& c, const char* key, const std::string& path,
                       double fallback);
bool get_bool(const nlohmann::json& c, const char* key, const std::string& path, bool fallback);
std::string get_string(const nlohmann::json& c, const char* key, const std::string& path,
                       const std::string& fallback);
// `a` % `b` == 0 for two sizes of config.json, or an error naming both keys.
void check_divides(const std::string& path, const char* a_key, int64_t a, const char* b_key,
                   int64_t b);
// rope_theta, or transformers 5's rope_parameters' (plain RoPE only: another
// rope_type is refused); absent: `fallback`. `what`: the usual values.
float get_rope_theta(const nlohmann::json& c, const std::string& path, double fallback,
                     const char* what);
// Refuses a key whose value this decoder does not compute.
[[noreturn]] void unsupported(const std::string& path, const char* key, const nlohmann::json& v,
                              const std::string& why);
// The shortest decimal of a float as a JSON number (1e-05, not 9.99999974737875e-06).
double tidy(float x);
// --moe-layer-freq for a per-layer MoE pattern: "1" when every layer is MoE,
// else the list "[0,1,...]"; "" when none is (the caller names its keys).
std::string moe_layer_freq_of(const std::vector<bool>& moe);

}  // namespace mt::hf_keys
