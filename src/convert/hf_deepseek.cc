#include "convert/hf_deepseek.h"

#include <cmath>

#include "convert/hf_keys.h"
#include "core/error.h"

namespace mt {

using nlohmann::json;
using namespace hf_keys;

namespace {

// The class defaults of DeepseekV3Config / DeepseekV2Config that differ.
struct Defaults {
  int64_t q_lora_rank, first_k_dense, n_shared;
  double scaling;
  bool norm_topk_prob;
  const char* scoring;
};
Defaults defaults_of(HfFamily f) {
  return f == HfFamily::kDeepseekV3 ? Defaults{1536, 3, 1, 2.5, true, "sigmoid"}
                                    : Defaults{1536, 0, 2, 1.0, false, "softmax"};
}

// rope_scaling: none (plain RoPE) or yarn, into m's YaRN fields (hf_deepseek.h).
void yarn_from_hf(const json& c, const std::string& path, HfFamily f, ModelConfig& m) {
  m.rope_type = "rope";
  if (!present(c, "rope_scaling")) return;
  const json& r = c.at("rope_scaling");
  const std::string where = path + " rope_scaling";
  MT_CHECK(r.is_object(), path, ": 'rope_scaling' is ", shown(r), ", not an object or null",
           kFixFile);
  const std::string type = get_string(r, present(r, "rope_type") ? "rope_type" : "type", where,
                                      "default");
  if (type != "yarn")
    unsupported(path, "rope_scaling", r, "DeepSeek's MLA here computes plain RoPE or YaRN");
  for (const char* key : {"attention_factor", "truncate"})
    if (present(r, key) && !(std::string(key) == "truncate" && r.at(key) == true))
      unsupported(path, "rope_scaling", r,
                  std::string("'") + key + "' is not built (Megatron's YaRN: the factor from "
                  "mscale and mscale_all_dim, correction range truncated)");
  m.rope_type = "yarn";
  m.rotary_scaling_factor = get_positive(r, "factor", where, 1.0, 0, "DeepSeek-V3 uses 40");
  m.yarn_original_max_position_embeddings = get_int(
      r, "original_max_position_embeddings", where, m.max_position_embeddings, false, kMaxPositions);
  m.yarn_beta_fast = get_positive(r, "beta_fast", where, 32, 0, "DeepSeek uses 32");
  m.yarn_beta_slow = get_positive(r, "beta_slow", where, 1, 0, "DeepSeek uses 1");
  const float ms = get_non_negative(r, "mscale", where, 0);
  const float all = get_non_negative(r, "mscale_all_dim", where, 0);
  // transformers takes factor = max_position_embeddings / original when the
  // original is given (some versions): refuse a file where the two disagree.
  if (present(r, "original_max_position_embeddings")) {
    const double ratio =
        double(m.max_position_embeddings) / double(m.yarn_original_max_position_embeddings);
    MT_CHECK(std::fabs(ratio - m.rotary_scaling_factor) <= 1e-6 * ratio, where, ": 'factor' ",
             shown(r.at("factor")), " is not 'max_position_embeddings' ",
             m.max_position_embeddings, " / 'original_max_position_embeddings' ",
             m.yarn_original_max_position_embeddings, " (transformers versions read one or the "
             "other); fix: correct config.json so that they agree");
  }
  if (ms > 0 && all > 0) {  // HF: mscale(f, mscale) / mscale(f, mscale_all_dim), as Megatron's
    m.mscale = ms;
    m.mscale_all_dim = all;
  } else if (all == 0) {  // HF: mscale(f, 1), softmax unscaled = Megatron's 1, 0
    m.mscale = 1.f;
    m.mscale_all_dim = 0.f;
  } else {
    unsupported(path, "rope_scaling", r,
                "mscale 0 (or absent) with mscale_all_dim: HF's attention factor is then "
                "mscale(factor, 1), Megatron's mscale(factor, mscale) / mscale(factor, "
                "mscale_all_dim)");
  }
  // mscale_all_dim's softmax factor mscale(factor, mscale_all_dim)^2 (V2-Lite's
  // 0.707): DeepSeek's own modeling_deepseek.py (V2 and V3) and Megatron's MLA
  // apply it; transformers' DeepseekV3Attention does, its DeepseekV2Attention
  // does not. A V2 folder imports with it, as the model was trained (hf_deepseek.h).
}

// The MoE layers: from first_k_dense_replace on, every moe_layer_freq-th (V2).
std::string deepseek_layer_freq(const json& c, const std::string& path, HfFamily f,
                                int64_t layers) {
  int64_t first = defaults_of(f).first_k_dense;
  if (c.contains("first_k_dense_replace")) {
    const json& v = c.at("first_k_dense_replace");
    MT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, path, ": 'first_k_dense_replace' is ",
             shown(v), ", not an integer >= 0", kFixFile);
    first = v.get<int64_t>();
  }
  const int64_t freq = get_int(c, "moe_layer_freq", path, 1, false, kMaxLayers);
  if (f == HfFamily::kDeepseekV3 && freq != 1)  // the original code reads it, transformers not
    unsupported(path, "moe_layer_freq", freq, "DeepseekV3DecoderLayer (transformers) ignores it, "
                "the original DeepSeek-V3 code does not (ambiguous; 1 converts)");
  std::vector<bool> moe(static_cast<size_t>(layers));
  for (int64_t l = 0; l < layers; ++l) moe[size_t(l)] = l >= first && l % freq == 0;
  const std::string pattern = moe_layer_freq_of(moe);
  MT_CHECK(!pattern.empty(), path, ": 'first_k_dense_replace' ", first, " leaves no layer of ", layers,
           " a mixture of experts (a dense DeepSeek model is not converted); fix: correct "
           "config.json");
  return pattern;
}

// The routed and shared experts and the router (hf_deepseek.h).
void experts_from_hf(const json& c, const std::string& path, HfFamily f, ModelConfig& m) {
  const Defaults d = defaults_of(f);
  const bool v3 = f == HfFamily::kDeepseekV3;
  m.num_experts = get_int(c, "n_routed_experts", path, 0, true, kMaxExperts);
  m.moe_router_topk = get_int(c, "num_experts_per_tok", path, 0, true, kMaxExperts);
  const int64_t E = m.num_experts, k = m.moe_router_topk;
  MT_CHECK(k <= E, path, ": 'num_experts_per_tok' ", k, " is above 'n_routed_experts' ", E,
           "; fix: correct config.json");
  m.moe_ffn_hidden_size = get_int(c, "moe_intermediate_size", path, 0, true, kMaxFfn);
  const int64_t shared = c.contains("n_shared_experts") && c.at("n_shared_experts").is_null()
                             ? 0
                             : get_int(c, "n_shared_experts", path, d.n_shared, false, kMaxExperts);
  MT_CHECK(shared > 0 || !v3, path, ": 'n_shared_experts' is null; DeepseekV3MoE always has "
           "shared experts", kFixFile);
  m.moe_shared_expert_intermediate_size = shared * m.moe_ffn_hidden_size;
  m.moe_layer_freq = deepseek_layer_freq(c, path, f, m.num_layers);
  const std::string scoring = get_string(c, "scoring_func", path, d.scoring);
  if (scoring != d.scoring)
    unsupported(path, "scoring_func", scoring,
                std::string(hf_family_name(f)) + " routes with " + d.scoring + " scores");
  const float scaling = get_positive(c, "routed_scaling_factor", path, d.scaling, 0,
                                     "DeepSeek-V3 uses 2.5, V2 1.0 to 16");
  m.moe_router_topk_scaling_factor = scaling == 1.f ? 0.f : scaling;
  const bool norm = get_bool(c, "norm_topk_prob", path, d.norm_topk_prob);
  m.moe_router_dtype = "fp32";  // HF's routers run in float32
  m.moe_router_load_balancing_type = get_bool(c, "seq_aux", path, true) ? "seq_aux_loss" : "aux_loss";
  m.moe_aux_loss_coeff = get_non_negative(c, "aux_loss_alpha", path, 0.001);
  const int64_t groups = get_int(c, "n_group", path, v3 ? 8 : 1, false, kMaxExperts);
  const int64_t group_topk = get_int(c, "topk_group", path, v3 ? 4 : 1, false, kMaxExperts);
  if (v3) {
    m.moe_router_score_function = "sigmoid";
    m.moe_router_enable_expert_bias = true;
    if (!norm || k == 1)
      unsupported(path, "norm_topk_prob", norm,
                  "Megatron's sigmoid router renormalises the chosen scores exactly when "
                  "num_experts_per_tok > 1 (norm_topk_prob true with more than one expert)");
  } else {
    m.moe_router_pre_softmax = true;  // the chosen probabilities of the softmax over all
    if (norm)
      unsupported(path, "norm_topk_prob", norm,
                  "DeepseekV2Moe (transformers) never renormalises, the original code does "
                  "with it (ambiguous; false converts)");
  }
  const std::string method = get_string(c, "topk_method", path, v3 ? "noaux_tc" : "greedy");
  const bool grouped = v3 ? groups > 1 : method == "group_limited_greedy";
  if (v3 && method != "noaux_tc")
    unsupported(path, "topk_method", method, "DeepseekV3TopkRouter chooses as noaux_tc");
  if (!v3 && method != "greedy" && method != "group_limited_greedy")
    unsupported(path, "topk_method", method, "DeepSeek-V2 here routes greedy or "
                "group_limited_greedy");
  if (!grouped) return;
  check_divides(path, "n_routed_experts", E, "n_group", groups);
  MT_CHECK(group_topk <= groups, path, ": 'topk_group' ", group_topk, " is above 'n_group' ",
           groups, kFixFile);
  // Megatron ranks a group by the sum of its top topk / topk_group keys; V3's
  // by its top 2, V2's by its max (top 1).
  const int64_t per_group = v3 ? 2 : 1;
  if (k != per_group * group_topk)
    unsupported(path, "topk_group", group_topk,
                std::string(v3 ? "DeepseekV3TopkRouter ranks a group by the sum of its top 2 "
                                 "scores"
                               : "group_limited_greedy ranks a group by its max score") +
                    ", Megatron's router by the sum of its top num_experts_per_tok / topk_group "
                    "= " + std::to_string(k) + " / " + std::to_string(group_topk) +
                    " (equal when num_experts_per_tok = " + std::to_string(per_group) +
                    " x topk_group)");
  MT_CHECK(E / groups >= 2 || !v3, path, ": 'n_group' ", groups, " leaves groups of one expert; "
           "DeepseekV3TopkRouter takes the top 2 of each", kFixFile);
  m.moe_router_num_groups = groups;
  m.moe_router_group_topk = group_topk;
}

}  // namespace

bool is_deepseek(HfFamily f) { return f == HfFamily::kDeepseekV3 || f == HfFamily::kDeepseekV2; }

ModelConfig deepseek_config_from_hf(const json& c, const std::string& path, HfFamily f) {
  const Defaults d = defaults_of(f);
  ModelConfig m;
  m.hidden_size = get_int(c, "hidden_size", path, 0, true, kMaxHidden);
  m.ffn_hidden_size = get_int(c, "intermediate_size", path, 0, true, kMaxFfn);
  m.num_layers = get_int(c, "num_hidden_layers", path, 0, true, kMaxLayers);
  m.num_attention_heads = get_int(c, "num_attention_heads", path, 0, true, kMaxHeads);
  const int64_t kv = get_int(c, "num_key_value_heads", path, m.num_attention_heads, false, kMaxHeads);
  if (kv != m.num_attention_heads)
    unsupported(path, "num_key_value_heads", kv, "MLA's keys and values are per head (" +
                std::to_string(m.num_attention_heads) + " num_attention_heads)");
  m.max_position_embeddings = get_int(c, "max_position_embeddings", path, 0, true, kMaxPositions);
  m.vocab_size = get_int(c, "vocab_size", path, 0, true, kMaxVocab);
  m.layernorm_epsilon = get_positive(c, "rms_norm_eps", path, 1e-6, 0, "DeepSeek uses 1e-06");
  if (m.layernorm_epsilon != 1e-6f)
    unsupported(path, "rms_norm_eps", c.at("rms_norm_eps"),
                "HF's latent norms (q_a_layernorm, kv_a_layernorm) take eps 1e-06 whatever it "
                "says, megatron.cpp one epsilon for every norm");
  m.rotary_base = get_rope_theta(c, path, 10000.0, "DeepSeek uses 10000");
  m.untie_embeddings_and_output_weights = !get_bool(c, "tie_word_embeddings", path, false);
  m.normalization = "RMSNorm";
  m.position_embedding_type = "rope";
  m.swiglu = true;
  m.disable_bias_linear = true;
  m.multi_latent_attention = true;
  m.qk_layernorm = true;  // the latent norms
  m.q_lora_rank = c.contains("q_lora_rank") && c.at("q_lora_rank").is_null()
                      ? 0  // null: a plain q_proj
                      : get_int(c, "q_lora_rank", path, d.q_lora_rank, false, kMaxHidden);
  m.kv_lora_rank = get_int(c, "kv_lora_rank", path, 512, false, kMaxHidden);
  m.qk_head_dim = get_int(c, "qk_nope_head_dim", path, 128, false, kMaxHidden);
  m.qk_pos_emb_head_dim = get_int(c, "qk_rope_head_dim", path, 64, false, kMaxHidden);
  m.v_head_dim = get_int(c, "v_head_dim", path, 128, false, kMaxHidden);
  MT_CHECK(m.qk_pos_emb_head_dim % 2 == 0, path, ": 'qk_rope_head_dim' ", m.qk_pos_emb_head_dim,
           " is odd; RoPE rotates pairs", kFixFile);
  if (present(c, "qk_head_dim"))
    MT_CHECK(get_int(c, "qk_head_dim", path, 0, true, kMaxHidden) ==
                 m.qk_head_dim + m.qk_pos_emb_head_dim,
             path, ": 'qk_head_dim' ", shown(c.at("qk_head_dim")), " is not 'qk_nope_head_dim' + "
             "'qk_rope_head_dim' = ", m.qk_head_dim + m.qk_pos_emb_head_dim, kFixFile);
  get_bool(c, "rope_interleave", path, true);  // checked here; false: deepseek_rope_layouts
  yarn_from_hf(c, path, f, m);
  if (get_bool(c, "attention_bias", path, false))
    unsupported(path, "attention_bias", true, "MLA's projections have no bias here");
  const std::string act = get_string(c, "hidden_act", path, "silu");
  if (act != "silu") unsupported(path, "hidden_act", act, "the gated MLPs are SwiGLU (silu)");
  experts_from_hf(c, path, f, m);
  // V3's multi-token prediction depths (model.layers.<L + k>.*): Megatron's
  // --mtp-num-layers; hf_to_megatron drops them when the folder lacks their
  // tensors (copies that trimmed them keep the key).
  if (f == HfFamily::kDeepseekV3 && present(c, "num_nextn_predict_layers") &&
      c.at("num_nextn_predict_layers") != 0)
    m.mtp_num_layers = get_int(c, "num_nextn_predict_layers", path, 0, false, kMaxLayers);
  return m;
}

HfFamily deepseek_family_of(const ModelConfig& c, std::vector<std::string>& off) {
  const bool v3 = c.moe_router_score_function == "sigmoid";
  const HfFamily f = v3 ? HfFamily::kDeepseekV3 : HfFamily::kDeepseekV2;
  const std::string want = std::string(" (") + hf_family_name(f) + ": ";
  if (!c.rms_norm()) off.push_back("normalization " + c.normalization + want + "RMSNorm)");
  if (!c.swiglu) off.push_back("a non-SwiGLU MLP" + want + "SwiGLU)");
  if (c.add_bias()) off.push_back("linear biases" + want + "none)");
  if (!c.qk_layernorm) off.push_back("no latent norms" + want + "--qk-layernorm)");
  if (c.apply_layernorm_1p) off.push_back("--apply-layernorm-1p" + want + "plain RMSNorm)");
  if (c.position_embedding_type != "rope")
    off.push_back("position embedding " + c.position_embedding_type + want + "rope)");
  if (c.layernorm_epsilon != 1e-6f) off.push_back("a norm epsilon other than 1e-6" + want +
                                                  "latent norms of eps 1e-06)");
  if (c.mla_rope_type() == "yarn") {  // transformers may take the factor from the ratio
    const double ratio =
        double(c.max_position_embeddings) / double(c.yarn_original_max_position_embeddings);
    if (std::fabs(ratio - c.rotary_scaling_factor) > 1e-6 * ratio)
      off.push_back("--max-position-embeddings " + std::to_string(c.max_position_embeddings) +
                    " not --rotary-scaling-factor x --yarn-original-max-position-embeddings" +
                    want + "transformers reads their ratio as the YaRN factor)");
  }
  if (!c.moe()) {
    off.push_back("no experts" + want + "a mixture of experts)");
    return f;
  }
  int64_t first = 0;
  while (first < c.num_layers && !c.is_moe_layer(first)) ++first;
  for (int64_t l = first; l < c.num_layers; ++l)
    if (!c.is_moe_layer(l)) {
      off.push_back("dense layers after MoE ones (--moe-layer-freq " + c.moe_layer_freq + want +
                    "first_k_dense_replace dense layers, then MoE)");
      break;
    }
  const int64_t shared = c.moe_shared_expert_intermediate_size, ffn = c.moe_ffn();
  if (shared % ffn != 0 || (v3 && shared == 0))
    off.push_back("--moe-shared-expert-intermediate-size " + std::to_string(shared) + want +
                  "n_shared_experts x moe_intermediate_size " + std::to_string(ffn) + ")");
  const int64_t k = c.moe_router_topk, per_group = v3 ? 2 : 1;
  if (c.moe_router_group_topk > 0 && k != per_group * c.moe_router_group_topk)
    off.push_back("--moe-router-group-topk " + std::to_string(c.moe_router_group_topk) +
                  " with top " + std::to_string(k) + want + "groups ranked by their top " +
                  std::to_string(per_group) + ": top-k = " + std::to_string(per_group) +
                  " x topk_group)");
  if (v3 && !c.moe_router_enable_expert_bias)
    off.push_back("no --moe-router-enable-expert-bias" + want + "e_score_correction_bias)");
  if (v3 && k == 1) off.push_back("top 1" + want + "norm_topk_prob renormalises)");
  if (!v3 && !c.moe_router_pre_softmax)
    off.push_back("the chosen probabilities renormalised" + want +
                  "--moe-router-pre-softmax, never renormalised)");
  return f;
}

void deepseek_config_to_hf(const ModelConfig& c, HfFamily f, json& j) {
  const bool v3 = f == HfFamily::kDeepseekV3;
  for (const char* key : {"mlp_bias", "pretraining_tp", "rope_scaling"}) j.erase(key);
  j["architectures"] = {v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
  j["model_type"] = hf_family_name(f);
  j["head_dim"] = c.qk_pos_emb_head_dim;  // the configs' own choice
  j["q_lora_rank"] = c.q_lora_rank > 0 ? json(c.q_lora_rank) : json(nullptr);
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_head_dim;
  j["qk_rope_head_dim"] = c.qk_pos_emb_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  if (c.mla_rope_type() == "yarn")
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", tidy(c.rotary_scaling_factor)},
                         {"original_max_position_embeddings",
                          c.yarn_original_max_position_embeddings},
                         {"beta_fast", tidy(c.yarn_beta_fast)},
                         {"beta_slow", tidy(c.yarn_beta_slow)},
                         {"mscale", tidy(c.mscale)},
                         {"mscale_all_dim", tidy(c.mscale_all_dim)}};
  int64_t first = 0;
  while (!c.is_moe_layer(first)) ++first;
  j["first_k_dense_replace"] = first;
  j["n_routed_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.moe_router_topk;
  j["moe_intermediate_size"] = c.moe_ffn();
  const int64_t shared = c.moe_shared_expert_intermediate_size / c.moe_ffn();
  j["n_shared_experts"] = shared > 0 ? json(shared) : json(nullptr);
  const float f_scale = c.moe_router_topk_scaling_factor;
  j["routed_scaling_factor"] = f_scale > 0 ? tidy(f_scale) : 1.0;
  j["norm_topk_prob"] = v3;
  j["scoring_func"] = v3 ? "sigmoid" : "softmax";
  j["seq_aux"] = c.moe_router_load_balancing_type == "seq_aux_loss";
  j["aux_loss_alpha"] = tidy(c.moe_aux_loss_coeff);
  const bool grouped = c.moe_router_group_topk > 0;
  if (v3) {
    j["n_group"] = grouped ? c.moe_router_num_groups : 1;
    j["topk_group"] = grouped ? c.moe_router_group_topk : 1;
    j["topk_method"] = "noaux_tc";
    j["rope_interleave"] = true;
    j["num_nextn_predict_layers"] = c.mtp_num_layers;
  } else {
    j["n_group"] = grouped ? json(c.moe_router_num_groups) : json(nullptr);
    j["topk_group"] = grouped ? json(c.moe_router_group_topk) : json(nullptr);
    j["topk_method"] = grouped ? "group_limited_greedy" : "greedy";
    j["moe_layer_freq"] = 1;
  }
}

const std::map<std::string, HfRule>& deepseek_layer_rules(HfFamily f,
                                                          const std::map<std::string, HfRule>& base) {
  auto make = [&](bool v3) {
    std::map<std::string, HfRule> r = base;
    r.erase("self_attention.linear_qkv.weight");
    const std::string a = "self_attn.";
    for (const auto& [ours, theirs] : std::initializer_list<std::pair<const char*, const char*>>{
             {"linear_q_proj.weight", "q_proj.weight"},
             {"linear_q_down_proj.weight", "q_a_proj.weight"},
             {"q_layernorm.weight", "q_a_layernorm.weight"},
             {"linear_q_up_proj.weight", "q_b_proj.weight"},
             {"linear_kv_down_proj.weight", "kv_a_proj_with_mqa.weight"},
             {"kv_layernorm.weight", "kv_a_layernorm.weight"},
             {"linear_kv_up_proj.weight", "kv_b_proj.weight"}})
      r.emplace(std::string("self_attention.") + ours, HfRule{{a + theirs}, HfLayout::kCopy});
    r.emplace("mlp.shared_experts.linear_fc1.weight",
              HfRule{{"mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"},
                     HfLayout::kGateUp});
    r.emplace("mlp.shared_experts.linear_fc2.weight",
              HfRule{{"mlp.shared_experts.down_proj.weight"}, HfLayout::kCopy});
    if (v3)
      r.emplace("mlp.router.expert_bias",
                HfRule{{"mlp.gate.e_score_correction_bias"}, HfLayout::kCopy});
    return r;
  };
  static const std::map<std::string, HfRule> v3 = make(true), v2 = make(false);
  return f == HfFamily::kDeepseekV3 ? v3 : v2;
}

void deepseek_rope_layouts(const json& c, HfFamily f, std::vector<HfParamMap>& maps) {
  if (f != HfFamily::kDeepseekV3 || !present(c, "rope_interleave") ||
      c.at("rope_interleave") != false)
    return;
  auto ends = [](const std::string& s, const char* tail) {
    const std::string t = tail;
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  for (HfParamMap& m : maps) {
    const std::string& n = m.param->name;
    if (ends(n, ".self_attention.linear_q_up_proj.weight") ||
        ends(n, ".self_attention.linear_q_proj.weight"))
      m.layout = HfLayout::kMlaQRopeHalves;
    else if (ends(n, ".self_attention.linear_kv_down_proj.weight"))
      m.layout = HfLayout::kMlaKvRopeHalves;
  }
}

const std::map<std::string, HfRule>& deepseek_mtp_rules() {
  static const std::map<std::string, HfRule> k = {
      {"enorm.weight", {{"enorm.weight"}, HfLayout::kCopy}},
      {"hnorm.weight", {{"hnorm.weight"}, HfLayout::kCopy}},
      {"eh_proj.weight", {{"eh_proj.weight"}, HfLayout::kCopy}},
      {"final_layernorm.weight", {{"shared_head.norm.weight"}, HfLayout::kCopy}}};
  return k;
}

std::vector<std::pair<std::string, std::string>> deepseek_mtp_copies(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int64_t d = 0; d < c.mtp_num_layers; ++d) {
    const std::string p = "model.layers." + std::to_string(c.num_layers + d) + ".";
    out.emplace_back(p + "embed_tokens.weight", "model.embed_tokens.weight");
    out.emplace_back(p + "shared_head.head.weight", "lm_head.weight");
  }
  return out;
}

}  // namespace mt
