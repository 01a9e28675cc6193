#include "convert/hf_qwen.h"

#include <algorithm>
#include <vector>

#include "convert/hf_keys.h"
#include "convert/hf_mistral.h"
#include "core/error.h"

namespace mt {

using nlohmann::json;
using namespace hf_keys;

namespace {

// Qwen2Config / Qwen3Config: with use_sliding_window the layers of
// layer_types "sliding_attention", or (without layer_types) those >=
// max_window_layers, see sliding_window keys; --window-size for all or none.
std::string qwen_window_from_hf(const json& c, const std::string& path, int64_t layers) {
  const bool use = get_bool(c, "use_sliding_window", path, false);
  const std::string window = use ? window_size_from_hf(c, "sliding_window", path, 4096) : "";
  int64_t windowed = 0;
  if (present(c, "layer_types")) {
    const json& t = c.at("layer_types");
    MT_CHECK(t.is_array() && int64_t(t.size()) == layers, path, ": 'layer_types' is ", shown(t),
             ", not a list of one entry per layer (num_hidden_layers ", layers, ")", kFixFile);
    for (const json& x : t) {
      if (x != "full_attention" && x != "sliding_attention")
        unsupported(path, "layer_types", t, "layers here are full_attention or sliding_attention");
      windowed += x == "sliding_attention";
    }
    if (windowed > 0 && window.empty())
      unsupported(path, "layer_types", t,
                  "sliding_attention layers without use_sliding_window and a sliding_window "
                  "(Qwen then has no window for them: ambiguous)");
  } else if (!window.empty()) {
    int64_t first = 28;  // Qwen2Config's default
    if (present(c, "max_window_layers")) {  // 0: every layer windowed
      const json& v = c.at("max_window_layers");
      MT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, path, ": 'max_window_layers' is ",
               shown(v), ", not an integer >= 0", kFixFile);
      first = v.get<int64_t>();
    }
    windowed = std::max<int64_t>(layers - first, 0);
  }
  if (window.empty() || windowed == 0) return "";
  const bool typed = present(c, "layer_types");
  if (windowed != layers)
    unsupported(path, typed ? "layer_types" : "max_window_layers",
                typed ? c.at("layer_types") : json(layers - windowed),
                "the sliding window is on " + std::to_string(windowed) + " of " +
                    std::to_string(layers) + " layers; megatron.cpp's --window-size is on every "
                    "layer (max_window_layers 0) or none");
  return window;
}

// Qwen3MoeDecoderLayer's MLP: sparse where the layer is not in
// mlp_only_layers and (layer + 1) % decoder_sparse_step == 0, else a dense
// Qwen3MoeMLP of intermediate_size; as --moe-layer-freq's per-layer list
// ("1" when every layer is MoE; Megatron's "N" counts from layer 0, HF's step
// from layer 1, so a step other than 1 is written as the list).
std::string qwen3_moe_layer_freq(const json& c, const std::string& path, int64_t layers) {
  const int64_t step = get_int(c, "decoder_sparse_step", path, 1, false, kMaxLayers);
  std::vector<bool> moe(static_cast<size_t>(layers), false);
  for (int64_t l = 0; l < layers; ++l) moe[size_t(l)] = (l + 1) % step == 0;
  if (present(c, "mlp_only_layers")) {
    const json& dense = c.at("mlp_only_layers");
    MT_CHECK(dense.is_array(), path, ": 'mlp_only_layers' is ", shown(dense),
             ", not a list of layer indices", kFixFile);
    for (const json& l : dense) {
      MT_CHECK(l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < layers, path,
               ": 'mlp_only_layers' holds ", shown(l), ", not a layer index in [0, ", layers,
               ") ('num_hidden_layers' ", layers, ")", kFixFile);
      moe[size_t(l.get<int64_t>())] = false;
    }
  }
  const std::string freq = moe_layer_freq_of(moe);
  MT_CHECK(!freq.empty(), path, ": 'decoder_sparse_step' ", step, " and 'mlp_only_layers' ",
           shown(c.value("mlp_only_layers", json::array())), " leave no layer of ", layers,
           " a mixture of experts; fix: convert it as the dense qwen3 model it is "
           "(model_type qwen3), or correct config.json");
  return freq;
}

// Qwen3MoeSparseMoeBlock: router `gate` (no bias), softmax over all experts in
// fp32, top num_experts_per_tok; norm_topk_prob true renormalises the k
// probabilities (= Megatron's default: top-k on the logits, softmax over the
// k), false keeps them (= --moe-router-pre-softmax). SwiGLU experts of
// moe_intermediate_size, no shared expert.
void qwen3_moe_config(const json& c, const std::string& path, ModelConfig& m) {
  hf_read_experts(c, path, "num_experts", "moe_intermediate_size", m);
  m.moe_router_pre_softmax = !get_bool(c, "norm_topk_prob", path, false);
  m.moe_layer_freq = qwen3_moe_layer_freq(c, path, m.num_layers);
  // output_router_logits: what the HF forward returns (training logs), not its math.
}

}  // namespace

ModelConfig qwen_config_from_hf(const json& c, const std::string& path, HfFamily f) {
  const bool qwen3 = f == HfFamily::kQwen3 || f == HfFamily::kQwen3Moe;  // Qwen3's attention
  const bool moe = f == HfFamily::kQwen3Moe;
  ModelConfig m;
  m.hidden_size = get_int(c, "hidden_size", path, 0, true, kMaxHidden);
  // Qwen3-MoE: the dense layers' size (Qwen3MoeConfig's default 6144).
  m.ffn_hidden_size = get_int(c, "intermediate_size", path, 6144, !moe, kMaxFfn);
  m.num_layers = get_int(c, "num_hidden_layers", path, 0, true, kMaxLayers);
  m.num_attention_heads = get_int(c, "num_attention_heads", path, 0, true, kMaxHeads);
  // num_key_value_heads required: the config classes' defaults are not "one
  // per head". head_dim (--kv-channels): Qwen3Config's default is 128;
  // Qwen2's and Qwen3-MoE's attention read it when given, else hidden / heads.
  hf_read_attention_heads(c, path, true, f == HfFamily::kQwen3 ? 128 : 0, m);
  m.max_position_embeddings = get_int(c, "max_position_embeddings", path, 0, true, kMaxPositions);
  m.vocab_size = get_int(c, "vocab_size", path, 0, true, kMaxVocab);
  m.layernorm_epsilon =
      get_positive(c, "rms_norm_eps", path, 1e-6, 0, "Qwen models use 1e-06");
  m.rotary_base = get_rope_theta(c, path, 10000.0, "Qwen models use 1000000");
  m.untie_embeddings_and_output_weights = !get_bool(c, "tie_word_embeddings", path, false);
  m.normalization = "RMSNorm";
  m.position_embedding_type = "rope";
  m.swiglu = true;
  m.disable_bias_linear = true;
  m.add_qkv_bias = !qwen3;  // Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False
  m.qk_layernorm = qwen3;   // Qwen3Attention: q_norm / k_norm over head_dim
  if (present(c, "rope_scaling"))
    unsupported(path, "rope_scaling", c.at("rope_scaling"),
                "megatron.cpp computes plain RoPE (no scaled or extended positions)");
  m.window_size = qwen_window_from_hf(c, path, m.num_layers);
  if (qwen3 && get_bool(c, "attention_bias", path, false))
    unsupported(path, "attention_bias", true,
                "Qwen3's attention bias is on q/k/v and o_proj; megatron.cpp has a bias on "
                "q/k/v alone (--add-qkv-bias) or on every linear layer");
  const std::string act = get_string(c, "hidden_act", path, "silu");
  if (act != "silu") unsupported(path, "hidden_act", act, "the gated MLP is SwiGLU (silu)");
  if (moe) qwen3_moe_config(c, path, m);
  return m;
}

void qwen_config_to_hf(const ModelConfig& c, HfFamily f, json& j) {
  const bool qwen3 = f != HfFamily::kQwen2;  // Qwen3's attention (qwen3, qwen3_moe)
  for (const char* key : {"mlp_bias", "pretraining_tp", "attention_bias"}) j.erase(key);
  j["architectures"] = {f == HfFamily::kQwen2   ? "Qwen2ForCausalLM"
                        : f == HfFamily::kQwen3 ? "Qwen3ForCausalLM"
                                                : "Qwen3MoeForCausalLM"};
  j["model_type"] = hf_family_name(f);
  if (qwen3) j["attention_bias"] = false;
  if (f == HfFamily::kQwen3Moe) {  // the dense layers as mlp_only_layers, the step 1
    json dense = json::array();
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (!c.is_moe_layer(l)) dense.push_back(l);
    j["intermediate_size"] = c.ffn_hidden_size;
    j["moe_intermediate_size"] = c.moe_ffn();
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.moe_router_topk;
    j["norm_topk_prob"] = !c.moe_router_pre_softmax;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = dense;
    j["router_aux_loss_coef"] = tidy(c.moe_aux_loss_coeff);
    j["output_router_logits"] = false;
  }
  // Qwen2's folders give head_dim only when it is not hidden / heads.
  if (!qwen3 && c.head_dim() * c.num_attention_heads == c.hidden_size) j.erase("head_dim");
  const bool window = c.window_left() >= 0;
  j["use_sliding_window"] = window;
  j["sliding_window"] = hf_sliding_window(c);
  j["max_window_layers"] = window ? 0 : c.num_layers;
}

const std::map<std::string, HfRule>& qwen_layer_rules(HfFamily f,
                                                      const std::map<std::string, HfRule>& llama) {
  static const std::map<std::string, HfRule> qwen2 = [&] {
    std::map<std::string, HfRule> r = llama;
    r.emplace("self_attention.linear_qkv.bias",
              HfRule{{"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"},
                     HfLayout::kLlamaQkv});
    return r;
  }();
  static const std::map<std::string, HfRule> qwen3 = [&] {
    std::map<std::string, HfRule> r = llama;
    r.emplace("self_attention.q_layernorm.weight",
              HfRule{{"self_attn.q_norm.weight"}, HfLayout::kCopy});
    r.emplace("self_attention.k_layernorm.weight",
              HfRule{{"self_attn.k_norm.weight"}, HfLayout::kCopy});
    return r;
  }();
  return f == HfFamily::kQwen3 ? qwen3 : qwen2;
}

}  // namespace mt
