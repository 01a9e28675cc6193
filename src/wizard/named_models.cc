#include "wizard/named_models.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "convert/hf_config.h"
#include "core/error.h"

namespace mt {

namespace {

// The architecture keys of each published config.json (the Hugging Face
// repository named beside it); the keys left out are the config class's
// defaults there too (initializer_range 0.02, GPT-2's gelu_new, Llama's silu).
const std::vector<NamedModel> kModels = {
    {"gpt2-small", "openai-community/gpt2",
     R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
         "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05})"},
    {"gpt2-medium", "openai-community/gpt2-medium",
     R"({"model_type": "gpt2", "n_embd": 1024, "n_layer": 24, "n_head": 16,
         "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05})"},
    {"gpt2-large", "openai-community/gpt2-large",
     R"({"model_type": "gpt2", "n_embd": 1280, "n_layer": 36, "n_head": 20,
         "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05})"},
    {"gpt2-xl", "openai-community/gpt2-xl",
     R"({"model_type": "gpt2", "n_embd": 1600, "n_layer": 48, "n_head": 25,
         "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05})"},
    {"llama3-8b", "meta-llama/Meta-Llama-3-8B",
     R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
         "vocab_size": 128256, "tie_word_embeddings": false})"},
    {"llama3-70b", "meta-llama/Meta-Llama-3-70B",
     R"({"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
         "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
         "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
         "vocab_size": 128256, "tie_word_embeddings": false})"},
    {"llama3.2-1b", "meta-llama/Llama-3.2-1B",
     R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
         "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
         "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
         "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192},
         "vocab_size": 128256, "tie_word_embeddings": true})"},
    {"llama3.2-3b", "meta-llama/Llama-3.2-3B",
     R"({"model_type": "llama", "hidden_size": 3072, "intermediate_size": 8192,
         "num_hidden_layers": 28, "num_attention_heads": 24, "num_key_value_heads": 8,
         "head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
         "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192},
         "vocab_size": 128256, "tie_word_embeddings": true})"},
    {"qwen3-0.6b", "Qwen/Qwen3-0.6B",
     R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
         "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
         "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
         "rope_theta": 1000000, "vocab_size": 151936, "tie_word_embeddings": true})"},
    {"qwen3-1.7b", "Qwen/Qwen3-1.7B",
     R"({"model_type": "qwen3", "hidden_size": 2048, "intermediate_size": 6144,
         "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
         "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
         "rope_theta": 1000000, "vocab_size": 151936, "tie_word_embeddings": true})"},
    {"qwen3-4b", "Qwen/Qwen3-4B",
     R"({"model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728,
         "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
         "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
         "rope_theta": 1000000, "vocab_size": 151936, "tie_word_embeddings": true})"},
    {"qwen3-8b", "Qwen/Qwen3-8B",
     R"({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
         "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
         "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
         "rope_theta": 1000000, "vocab_size": 151936, "tie_word_embeddings": false})"},
    {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B",
     R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
         "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
         "vocab_size": 151936, "tie_word_embeddings": true})"},
    {"qwen2.5-7b", "Qwen/Qwen2.5-7B",
     R"({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
         "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
         "vocab_size": 152064, "tie_word_embeddings": false})"},
    {"mistral-7b", "mistralai/Mistral-7B-v0.1",
     R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
         "sliding_window": 4096, "vocab_size": 32000, "tie_word_embeddings": false})"},
    {"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1",
     R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
         "sliding_window": null, "num_local_experts": 8, "num_experts_per_tok": 2,
         "router_aux_loss_coef": 0.02, "vocab_size": 32000, "tie_word_embeddings": false})"},
};

}  // namespace

const std::vector<NamedModel>& named_models() { return kModels; }

const NamedModel* find_named_model(const std::string& name) {
  const auto it = std::find_if(kModels.begin(), kModels.end(),
                               [&](const NamedModel& m) { return name == m.name; });
  return it == kModels.end() ? nullptr : &*it;
}

ModelConfig named_model_config(const NamedModel& m) {
  HfFamily family;
  return model_config_from_hf(nlohmann::json::parse(m.config),
                              std::string(m.source) + " (config.json)", &family);
}

int64_t default_seq_length(const ModelConfig& m) {
  const int64_t context = m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_length;
  return std::min<int64_t>(context, 4096);
}

}  // namespace mt
