#include "convert/hf_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "convert/hf_deepseek.h"
#include "convert/hf_keys.h"
#include "convert/hf_mistral.h"
#include "convert/hf_qwen.h"
#include "convert/hf_rope_scaling.h"
#include "core/error.h"

namespace mt {

namespace hf_keys {

using nlohmann::json;

// A value for messages: scalars as JSON, long objects cut.
std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

bool present(const json& c, const char* key) { return c.contains(key) && !c.at(key).is_null(); }

int64_t get_int(const json& c, const char* key, const std::string& path, int64_t fallback,
                bool required, int64_t max_value) {
  if (!present(c, key)) {
    MT_CHECK(!required, path, " has no '", key, "'; fix: a Hugging Face config.json of this "
             "model type always has it (the file is incomplete or of another model type)");
    return fallback;
  }
  const json& v = c.at(key);  // nlohmann stores a non-negative integer as unsigned
  const bool u = v.is_number_unsigned();
  MT_CHECK(u ? v.get<uint64_t>() >= 1 : v.is_number_integer() && v.get<int64_t>() >= 1, path,
           ": '", key, "' is ", shown(v), ", not an integer >= 1", kFixFile);
  MT_CHECK(u ? v.get<uint64_t>() <= uint64_t(max_value) : v.get<int64_t>() <= max_value, path,
           ": '", key, "' is ", shown(v), ", above the limit ", max_value,
           " (no real model is that large)", kFixFile);
  return v.get<int64_t>();
}

// A number that must be finite and above `above` once stored as a float (the
// precision megatron.cpp keeps): `what` says the usual values, for the fix.
float get_positive(const json& c, const char* key, const std::string& path, double fallback,
                   double above, const char* what) {
  if (!present(c, key)) return float(fallback);
  const json& v = c.at(key);
  MT_CHECK(v.is_number(), path, ": '", key, "' is ", shown(v), ", not a number", kFixFile);
  const float x = float(v.get<double>());
  MT_CHECK(std::isfinite(x) && x > above, path, ": '", key, "' is ", shown(v),
           ", not a finite number > ", above, "; fix: correct config.json (", what, ")");
  return x;
}

// `a` % `b` == 0 for two sizes of config.json, or an error naming both keys.
void check_divides(const std::string& path, const char* a_key, int64_t a, const char* b_key,
                   int64_t b) {
  MT_CHECK(a % b == 0, path, ": '", a_key, "' ", a, " is not divisible by '", b_key, "' ", b,
           kFixFile);
}

// A number that must be finite and >= 0 once stored as a float.
float get_non_negative(const json& c, const char* key, const std::string& path, double fallback) {
  if (!present(c, key)) return float(fallback);
  const json& v = c.at(key);
  MT_CHECK(v.is_number(), path, ": '", key, "' is ", shown(v), ", not a number", kFixFile);
  const float x = float(v.get<double>());
  MT_CHECK(std::isfinite(x) && x >= 0, path, ": '", key, "' is ", shown(v),
           ", not a finite number >= 0", kFixFile);
  return x;
}

bool get_bool(const json& c, const char* key, const std::string& path, bool fallback) {
  if (!present(c, key)) return fallback;
  const json& v = c.at(key);
  MT_CHECK(v.is_boolean(), path, ": '", key, "' is ", shown(v), ", not true or false");
  return v.get<bool>();
}

std::string get_string(const json& c, const char* key, const std::string& path,
                       const std::string& fallback) {
  if (!present(c, key)) return fallback;
  const json& v = c.at(key);
  MT_CHECK(v.is_string(), path, ": '", key, "' is ", shown(v), ", not a string");
  return v.get<std::string>();
}

// Refuses a key whose value this decoder does not compute.
[[noreturn]] void unsupported(const std::string& path, const char* key, const json& v,
                              const std::string& why) {
  MT_FAIL(path, ": ", key, " = ", shown(v), " is not supported: ", why,
          "; fix: convert a model without it (megatron.cpp would compute another function)");
}

float get_rope_theta(const json& c, const std::string& path, double fallback, const char* what) {
  double theta = fallback;
  if (present(c, "rope_parameters")) {  // transformers 5's form of rope_theta / rope_scaling
    const json& r = c.at("rope_parameters");
    if (!r.is_object() || r.value("rope_type", std::string("default")) != "default")
      unsupported(path, "rope_parameters", r,
                  "megatron.cpp computes plain RoPE (rope_type default only)");
    theta = get_positive(r, "rope_theta", path + " rope_parameters", fallback, 1, what);
  }
  return get_positive(c, "rope_theta", path, theta, 1, what);
}

// The shortest decimal of a float as a JSON number (1e-05, not 9.99999974737875e-06).
double tidy(float x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::string moe_layer_freq_of(const std::vector<bool>& moe) {
  std::string list;
  bool all = true, any = false;
  for (bool x : moe) {
    list += std::string(list.empty() ? "[" : ",") + (x ? "1" : "0");
    all = all && x;
    any = any || x;
  }
  return !any ? "" : all ? "1" : list + "]";
}

}  // namespace hf_keys

namespace {

using namespace hf_keys;

ModelConfig gpt2_config(const json& c, const std::string& path) {
  ModelConfig m;
  m.hidden_size = get_int(c, "n_embd", path, 0, true, kMaxHidden);
  m.num_layers = get_int(c, "n_layer", path, 0, true, kMaxLayers);
  m.num_attention_heads = get_int(c, "n_head", path, 0, true, kMaxHeads);
  m.ffn_hidden_size = get_int(c, "n_inner", path, 4 * m.hidden_size, false, kMaxFfn);  // null: 4h
  m.max_position_embeddings = get_int(c, "n_positions", path, 0, true, kMaxPositions);
  m.vocab_size = get_int(c, "vocab_size", path, 0, true, kMaxVocab);
  m.layernorm_epsilon = get_positive(c, "layer_norm_epsilon", path, 1e-5, 0, "GPT-2 uses 1e-05");
  check_divides(path, "n_embd", m.hidden_size, "n_head", m.num_attention_heads);
  const std::string act = get_string(c, "activation_function", path, "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    unsupported(path, "activation_function", act,
                "megatron.cpp's GELU is the tanh approximation (gelu_new / gelu_pytorch_tanh)");
  if (!get_bool(c, "tie_word_embeddings", path, true))
    unsupported(path, "tie_word_embeddings", false,
                "a GPT-2 block here has its output layer tied to the word embedding");
  if (!get_bool(c, "scale_attn_weights", path, true))
    unsupported(path, "scale_attn_weights", false, "attention scores are scaled by 1/sqrt(d)");
  if (get_bool(c, "scale_attn_by_inverse_layer_idx", path, false))
    unsupported(path, "scale_attn_by_inverse_layer_idx", true,
                "attention scores are scaled by 1/sqrt(d) only");
  if (get_bool(c, "add_cross_attention", path, false))
    unsupported(path, "add_cross_attention", true, "a decoder-only model has no cross-attention");
  return m;  // GPT-2's block is ModelConfig's default configuration
}

// Llama's block, read for family f (llama, mixtral, mistral): Mixtral's and
// Mistral's num_key_value_heads is required (their class default 8 is not
// Llama's "one per head"), Mixtral's rope_theta defaults to 1e6.
ModelConfig llama_config(const json& c, const std::string& path, HfFamily f) {
  const bool mixtral = f == HfFamily::kMixtral;
  ModelConfig m;
  m.hidden_size = get_int(c, "hidden_size", path, 0, true, kMaxHidden);
  m.ffn_hidden_size = get_int(c, "intermediate_size", path, 0, true, kMaxFfn);
  m.num_layers = get_int(c, "num_hidden_layers", path, 0, true, kMaxLayers);
  m.num_attention_heads = get_int(c, "num_attention_heads", path, 0, true, kMaxHeads);
  hf_read_attention_heads(c, path, f != HfFamily::kLlama, 0, m);
  m.max_position_embeddings = get_int(c, "max_position_embeddings", path, 0, true, kMaxPositions);
  m.vocab_size = get_int(c, "vocab_size", path, 0, true, kMaxVocab);
  m.layernorm_epsilon =
      get_positive(c, "rms_norm_eps", path, 1e-6, 0, "Llama models use 1e-05 or 1e-06");
  m.rotary_base = get_rope_theta(c, path, mixtral ? 1e6 : 10000.0,
                                 "Llama models use 10000 or 500000, Mistral 10000 or 1000000, "
                                 "Mixtral 1000000");
  m.untie_embeddings_and_output_weights = !get_bool(c, "tie_word_embeddings", path, false);
  m.normalization = "RMSNorm";
  m.position_embedding_type = "rope";
  m.swiglu = true;
  m.disable_bias_linear = true;
  rope_scaling_from_hf(c, path, !mixtral, m);  // Llama 3.1's llama3 only
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (get_bool(c, key, path, false))
      unsupported(path, key, true, "the Llama configuration has no linear biases");
  const std::string act = get_string(c, "hidden_act", path, "silu");
  if (act != "silu")
    unsupported(path, "hidden_act", act,
                mixtral ? "each expert is a SwiGLU (silu) MLP" : "the gated MLP is SwiGLU (silu)");
  return m;
}

// Llama's attention and norms; every MLP a mixture of experts as Mixtral's
// (MixtralSparseMoeBlock): router `gate` without bias, softmax over all
// experts in fp32, top-k, renormalised; SwiGLU experts w2(silu(w1 x) * w3 x).
ModelConfig mixtral_config(const json& c, const std::string& path) {
  ModelConfig m = llama_config(c, path, HfFamily::kMixtral);
  m.window_size = window_size_from_hf(c, "sliding_window", path, 0);  // MixtralConfig's: None
  hf_read_experts(c, path, "num_local_experts", "intermediate_size", m);
  m.moe_layer_freq = "1";            // every layer
  m.moe_router_pre_softmax = false;  // top-k on logits, softmax over k = Mixtral's
  return m;
}

}  // namespace

void hf_read_attention_heads(const json& c, const std::string& path, bool kv_required,
                             int64_t head_dim_default, ModelConfig& m) {
  const int64_t kv =
      get_int(c, "num_key_value_heads", path, m.num_attention_heads, kv_required, kMaxHeads);
  if (kv != m.num_attention_heads) {
    m.group_query_attention = true;
    m.num_query_groups = kv;
  }
  // head_dim: Megatron's --kv-channels; given, the hidden size need not
  // divide by the heads.
  int64_t d = 0;
  if (present(c, "head_dim") || head_dim_default > 0) {
    d = get_int(c, "head_dim", path, head_dim_default, false, kMaxHidden);
    m.kv_channels = d;
  } else {
    check_divides(path, "hidden_size", m.hidden_size, "num_attention_heads",
                  m.num_attention_heads);
    d = m.hidden_size / m.num_attention_heads;
  }
  MT_CHECK(d % 2 == 0, path, ": the head dimension ", d, " ('head_dim', or 'hidden_size' ",
           m.hidden_size, " / 'num_attention_heads' ", m.num_attention_heads,
           ") is odd; RoPE rotates pairs of features", kFixFile);
  check_divides(path, "num_attention_heads", m.num_attention_heads, "num_key_value_heads", kv);
}

void hf_read_experts(const json& c, const std::string& path, const char* experts_key,
                     const char* moe_ffn_key, ModelConfig& m) {
  m.num_experts = get_int(c, experts_key, path, 0, true, kMaxExperts);
  m.moe_router_topk = get_int(c, "num_experts_per_tok", path, 0, true, kMaxExperts);
  MT_CHECK(m.moe_router_topk <= m.num_experts, path, ": 'num_experts_per_tok' ",
           m.moe_router_topk, " is above '", experts_key, "' ", m.num_experts,
           " (a token cannot be routed to more experts than there are); fix: correct "
           "config.json (num_experts_per_tok <= ", experts_key, ")");
  m.moe_ffn_hidden_size = get_int(c, moe_ffn_key, path, 0, true, kMaxFfn);
  m.moe_router_load_balancing_type = "aux_loss";
  m.moe_aux_loss_coeff = get_non_negative(c, "router_aux_loss_coef", path, 0.001);
}

const char* hf_family_name(HfFamily f) {
  switch (f) {
    case HfFamily::kGpt2: return "gpt2";
    case HfFamily::kLlama: return "llama";
    case HfFamily::kMixtral: return "mixtral";
    case HfFamily::kQwen2: return "qwen2";
    case HfFamily::kQwen3: return "qwen3";
    case HfFamily::kMistral: return "mistral";
    case HfFamily::kQwen3Moe: return "qwen3_moe";
    case HfFamily::kDeepseekV3: return "deepseek_v3";
    case HfFamily::kDeepseekV2: return "deepseek_v2";
  }
  return "?";
}

ModelConfig model_config_from_hf(const json& config, const std::string& path, HfFamily* family) {
  MT_CHECK(config.is_object(), path, " is not a JSON object");
  const std::string type = get_string(config, "model_type", path, "");
  ModelConfig m;
  if (type == "gpt2") {
    *family = HfFamily::kGpt2;
    m = gpt2_config(config, path);
  } else if (type == "llama") {
    *family = HfFamily::kLlama;
    m = llama_config(config, path, HfFamily::kLlama);
  } else if (type == "mistral") {
    *family = HfFamily::kMistral;
    m = llama_config(config, path, HfFamily::kMistral);
    mistral_config_from_hf(config, path, m);
  } else if (type == "mixtral") {
    *family = HfFamily::kMixtral;
    m = mixtral_config(config, path);
  } else if (type == "qwen2" || type == "qwen3" || type == "qwen3_moe") {
    *family = type == "qwen2"   ? HfFamily::kQwen2
              : type == "qwen3" ? HfFamily::kQwen3
                                : HfFamily::kQwen3Moe;
    m = qwen_config_from_hf(config, path, *family);
  } else if (type == "deepseek_v3" || type == "deepseek_v2") {
    *family = type == "deepseek_v3" ? HfFamily::kDeepseekV3 : HfFamily::kDeepseekV2;
    m = deepseek_config_from_hf(config, path, *family);
  } else {
    MT_FAIL(path, ": model_type '", type, "' is not supported; megatron.cpp converts 'gpt2' "
            "(GPT2LMHeadModel), 'llama' (LlamaForCausalLM), 'mistral' (MistralForCausalLM), "
            "'mixtral' (MixtralForCausalLM), 'qwen2' (Qwen2ForCausalLM), 'qwen3' "
            "(Qwen3ForCausalLM), 'qwen3_moe' (Qwen3MoeForCausalLM), 'deepseek_v3' "
            "(DeepseekV3ForCausalLM) and 'deepseek_v2' (DeepseekV2ForCausalLM) models; fix: --load-dir a "
            "folder of one of those");
  }
  m.seq_length = m.max_position_embeddings;
  m.init_method_std =
      get_positive(config, "initializer_range", path, 0.02, 0, "models use 0.02");
  m.hidden_dropout = 0.f;
  m.attention_dropout = 0.f;
  return m;
}

namespace {
[[noreturn]] void no_equivalent(const std::string& near, const std::vector<std::string>& off) {
  std::string list;
  for (const std::string& s : off) list += (list.empty() ? "" : ", ") + s;
  MT_FAIL("the checkpoint's model has no Hugging Face equivalent: nearest is ", near,
          " but it has ", list,
          "; megatron.cpp exports gpt2 (LayerNorm, learned positions, GELU, biases, tied output), "
          "llama (RMSNorm, rope, SwiGLU, no linear biases), mixtral (llama with every MLP a "
          "mixture of experts, Megatron's default router), mistral (llama with --window-size), "
          "qwen2 (llama with --add-qkv-bias), qwen3 (llama with --qk-layernorm), qwen3_moe "
          "(qwen3 with mixture-of-experts layers, either router) and deepseek_v3 / deepseek_v2 "
          "(--multi-latent-attention with DeepSeek's experts: hf_deepseek.h)");
}
}  // namespace

HfFamily hf_family_of(const ModelConfig& c) {
  if (c.multi_latent_attention) {  // DeepSeek's families alone have MLA
    std::vector<std::string> off;
    const HfFamily f = deepseek_family_of(c, off);
    if (!off.empty()) no_equivalent(hf_family_name(f), off);
    return f;
  }
  // Near Llama (any of its features, experts, q/k norms or a QKV bias alone):
  // list what differs from the nearest of Llama, Mixtral (experts), Qwen3-MoE
  // (experts and q/k norms), Qwen3 (q/k norms) and Qwen2 (a QKV bias alone);
  // else from GPT-2.
  const bool qkv_bias_alone = c.add_qkv_bias && !c.add_bias();
  const bool llama_like =
      c.rms_norm() || c.rope() || c.swiglu || c.moe() || c.qk_layernorm || qkv_bias_alone;
  const HfFamily near_f = !llama_like                   ? HfFamily::kGpt2
                          : c.moe() && c.qk_layernorm   ? HfFamily::kQwen3Moe
                          : c.moe()                     ? HfFamily::kMixtral
                          : c.qk_layernorm              ? HfFamily::kQwen3
                          : qkv_bias_alone              ? HfFamily::kQwen2
                          : c.window_left() >= 0        ? HfFamily::kMistral
                                                        : HfFamily::kLlama;
  const std::string near = hf_family_name(near_f);
  std::vector<std::string> off;
  if (llama_like) {
    const std::string want = " (" + near + ": ";
    if (!c.rms_norm()) off.push_back("normalization " + c.normalization + want + "RMSNorm)");
    if (!c.rope())
      off.push_back("position embedding " + c.position_embedding_type + want + "rope)");
    if (!c.swiglu)
      off.push_back(std::string(c.squared_relu ? "a squared-ReLU MLP" : "a GELU MLP") + want +
                    "SwiGLU)");
    if (c.add_bias()) off.push_back("linear biases" + want + "--disable-bias-linear)");
    if (c.rotary_percent != 1.f)
      off.push_back("rotary_percent " + nlohmann::json(tidy(c.rotary_percent)).dump() + want +
                    "1.0)");
    if (c.use_rope_scaling && near_f != HfFamily::kLlama)
      off.push_back("--use-rope-scaling (" + near + ": no rope_scaling; llama's is llama3)");
    if (c.moe() && qkv_bias_alone) off.push_back("--add-qkv-bias (" + near + ": no biases)");
    if (!c.moe() && c.qk_layernorm && qkv_bias_alone)
      off.push_back("--add-qkv-bias with --qk-layernorm (qwen3: no q/k/v biases; qwen2: no q/k "
                    "norms)");
  } else {
    if (!c.learned_positions())
      off.push_back("position embedding " + c.position_embedding_type +
                    " (gpt2: learned_absolute)");
    if (c.squared_relu) off.push_back("--squared-relu (gpt2: GELU)");
    if (!c.add_bias()) off.push_back("no linear biases (gpt2: biases)");
    if (c.window_left() >= 0)
      off.push_back("--window-size " + c.window_size + " (gpt2: no sliding window)");
    if (!c.tied_output()) off.push_back("an untied output layer (gpt2: tied)");
    if (c.query_groups() != c.num_attention_heads)
      off.push_back("grouped-query attention (gpt2: one key/value head per head)");
  }
  if (!c.mlp_kind.empty())
    off.push_back("--mlp-kind " + c.mlp_kind + " (a block registered by a program; " + near +
                  ": its own MLP)");
  if (!llama_like && c.head_dim() * c.num_attention_heads != c.hidden_size)
    off.push_back("--kv-channels " + std::to_string(c.head_dim()) +
                  " (gpt2: hidden / heads = " +
                  std::to_string(c.hidden_size / c.num_attention_heads) + ")");
  if (c.multi_latent_attention)
    off.push_back("--multi-latent-attention (" + near + ": standard attention)");
  if (c.position_embedding_type == "yarn")
    off.push_back("position embedding yarn (" + near + ": no YaRN)");
  if (c.apply_layernorm_1p)
    off.push_back("--apply-layernorm-1p (" + near + ": norm weights are gamma, not gamma - 1)");
  if (c.moe() && c.moe_shared_expert_intermediate_size > 0)
    off.push_back("a shared expert (" + near + ": none)");
  if (c.moe() && (c.moe_router_score_function != "softmax" || c.moe_router_group_topk > 0 ||
                  c.moe_router_enable_expert_bias || c.moe_router_topk_scaling_factor > 0))
    off.push_back("DeepSeek-V3's routing (--moe-router-score-function, groups, expert bias or "
                  "scaling factor; " + near + ": softmax top-k)");
  if (near_f == HfFamily::kMixtral) {  // Qwen3-MoE has dense layers and both routers
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (!c.is_moe_layer(l)) {
        off.push_back("dense MLP layers (--moe-layer-freq " + c.moe_layer_freq +
                      "; mixtral: every layer MoE)");
        break;
      }
    if (c.moe_router_pre_softmax)
      off.push_back("--moe-router-pre-softmax (mixtral renormalises the top-k probabilities: "
                    "Megatron's default router)");
  }
  if (off.empty()) return near_f;
  no_equivalent(near, off);
}

json hf_config_from_model(const ModelConfig& c, HfFamily f, const json& tokenizer,
                          const std::string& torch_dtype, int64_t vocab_rows) {
  json j;
  const bool has_eod = tokenizer.is_object() && tokenizer.contains("eod") &&
                       tokenizer.at("eod").is_number_integer() && tokenizer.at("eod") >= 0;
  const bool has_bos = tokenizer.is_object() && tokenizer.contains("bos") &&
                       tokenizer.at("bos").is_number_integer() && tokenizer.at("bos") >= 0;
  if (f == HfFamily::kGpt2) {
    j = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", vocab_rows},
         {"n_embd", c.hidden_size},
         {"n_layer", c.num_layers},
         {"n_head", c.num_attention_heads},
         {"n_inner", c.ffn_hidden_size},
         {"n_positions", c.max_position_embeddings},
         {"n_ctx", c.max_position_embeddings},
         {"activation_function", "gelu_new"},
         {"layer_norm_epsilon", tidy(c.layernorm_epsilon)},
         {"resid_pdrop", tidy(c.hidden_dropout)},
         {"embd_pdrop", tidy(c.hidden_dropout)},
         {"attn_pdrop", tidy(c.attention_dropout)},
         {"initializer_range", tidy(c.init_method_std)},
         {"scale_attn_weights", true},
         {"tie_word_embeddings", true},
         {"use_cache", true}};
    if (has_eod) j["bos_token_id"] = j["eos_token_id"] = tokenizer.at("eod");  // <|endoftext|>
  } else {
    j = {{"architectures", {"LlamaForCausalLM"}},
         {"model_type", "llama"},
         {"vocab_size", vocab_rows},
         {"hidden_size", c.hidden_size},
         {"intermediate_size", c.ffn_hidden_size},
         {"num_hidden_layers", c.num_layers},
         {"num_attention_heads", c.num_attention_heads},
         {"num_key_value_heads", c.query_groups()},
         {"head_dim", c.head_dim()},
         {"max_position_embeddings", c.max_position_embeddings},
         {"rms_norm_eps", tidy(c.layernorm_epsilon)},
         {"rope_theta", tidy(c.rotary_base)},
         {"rope_scaling", rope_scaling_to_hf(c)},
         {"hidden_act", "silu"},
         {"attention_bias", false},
         {"mlp_bias", false},
         {"attention_dropout", tidy(c.attention_dropout)},
         {"initializer_range", tidy(c.init_method_std)},
         {"tie_word_embeddings", c.tied_output()},
         {"pretraining_tp", 1},
         {"use_cache", true}};
    if (has_bos) j["bos_token_id"] = tokenizer.at("bos");
    if (has_eod) j["eos_token_id"] = tokenizer.at("eod");
  }
  if (f == HfFamily::kMixtral) {  // Llama's keys but those MixtralConfig has not, plus the experts
    for (const char* key : {"rope_scaling", "attention_bias", "mlp_bias", "pretraining_tp"})
      j.erase(key);
    j["architectures"] = {"MixtralForCausalLM"};
    j["model_type"] = "mixtral";
    j["intermediate_size"] = c.moe_ffn();
    j["sliding_window"] = hf_sliding_window(c);
    j["num_local_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.moe_router_topk;
    j["router_aux_loss_coef"] = tidy(c.moe_aux_loss_coeff);
    j["output_router_logits"] = false;
    j["router_jitter_noise"] = 0.0;
  }
  if (f == HfFamily::kQwen2 || f == HfFamily::kQwen3 || f == HfFamily::kQwen3Moe)
    qwen_config_to_hf(c, f, j);
  if (f == HfFamily::kMistral) mistral_config_to_hf(c, j);
  if (is_deepseek(f)) deepseek_config_to_hf(c, f, j);
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace mt
