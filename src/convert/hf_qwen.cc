#include "convert/hf_qwen.h"

#include <vector>

#include "convert/hf_keys.h"
#include "core/error.h"

namespace mt {

using nlohmann::json;
using namespace hf_keys;

namespace {

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
  std::string list;
  bool all = true, any = false;
  for (bool x : moe) {
    list += std::string(list.empty() ? "[" : ",") + (x ? "1" : "0");
    all = all && x;
    any = any || x;
  }
  MT_CHECK(any, path, ": 'decoder_sparse_step' ", step, " and 'mlp_only_layers' ",
           shown(c.value("mlp_only_layers", json::array())), " leave no layer of ", layers,
           " a mixture of experts; fix: convert it as the dense qwen3 model it is "
           "(model_type qwen3), or correct config.json");
  return all ? "1" : list + "]";
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
  float theta = 10000.f;
  if (present(c, "rope_parameters")) {  // transformers 5's form of rope_theta / rope_scaling
    const json& r = c.at("rope_parameters");
    if (!r.is_object() || r.value("rope_type", std::string("default")) != "default")
      unsupported(path, "rope_parameters", r,
                  "megatron.cpp computes plain RoPE (rope_type default only)");
    theta = get_positive(r, "rope_theta", path + " rope_parameters", 10000.0, 1,
                         "Qwen models use 1000000");
  }
  m.rotary_base = get_positive(c, "rope_theta", path, theta, 1, "Qwen models use 1000000");
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
  if (get_bool(c, "use_sliding_window", path, false))
    unsupported(path, "use_sliding_window", true,
                "megatron.cpp's attention sees every earlier position (no sliding window yet)");
  if (present(c, "layer_types")) {
    const json& t = c.at("layer_types");
    MT_CHECK(t.is_array(), path, ": 'layer_types' is ", shown(t), ", not a list");
    for (const json& x : t)
      if (x != "full_attention")
        unsupported(path, "layer_types", t,
                    "every layer here is full attention (no sliding-window layers yet)");
  }
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
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = c.num_layers;
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
