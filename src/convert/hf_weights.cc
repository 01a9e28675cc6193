#include "convert/hf_weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "convert/hf_deepseek.h"
#include "convert/hf_qwen.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace mt {

namespace {

// Where Megatron row r of a row-gathered layout lives: row `row` of HF tensor
// `tensor` (for kGpt2Qkv weights, of c_attn transposed); `pad`: a padded
// vocabulary row (a copy of `row` on import, dropped on export).
struct RowSource {
  int tensor = 0;
  int64_t row = 0;
  bool pad = false;
};

// `vocab_rows`: rows of the Hugging Face vocabulary tensor (kVocab); `rows`:
// Megatron's (kGateUp: twice the gate's).
RowSource row_source(HfLayout layout, const ModelConfig& c, int64_t vocab_rows, int64_t rows,
                     int64_t r) {
  switch (layout) {
    case HfLayout::kVocab:
      return r < vocab_rows ? RowSource{0, r, false} : RowSource{0, vocab_rows - 1, true};
    case HfLayout::kGpt2Qkv: {  // Megatron row (head j, w of q/k/v, e) = HF column w·h + j·d + e
      const int64_t d = c.head_dim(), j = r / (3 * d), w = r % (3 * d) / d, e = r % d;
      return {0, w * c.hidden_size + j * d + e, false};
    }
    case HfLayout::kLlamaQkv: {  // per group: its heads' q rows, then its k, then its v
      const int64_t d = c.head_dim(), hpg = c.num_attention_heads / c.query_groups();
      const int64_t block = (hpg + 2) * d, g = r / block, k = r % block;
      if (k < hpg * d) return {0, g * hpg * d + k, false};
      if (k < (hpg + 1) * d) return {1, g * d + k - hpg * d, false};
      return {2, g * d + k - (hpg + 1) * d, false};
    }
    case HfLayout::kGateUp:
      return r < rows / 2 ? RowSource{0, r, false} : RowSource{1, r - rows / 2, false};
    case HfLayout::kMlaQRopeHalves:
    case HfLayout::kMlaKvRopeHalves: {  // rope feature i (Megatron: pairs) <- HF (halves)
      const bool q = layout == HfLayout::kMlaQRopeHalves;
      const int64_t dpe = c.qk_pos_emb_head_dim, block = q ? c.qk_head_dim + dpe : rows;
      const int64_t base = r - r % block, first = q ? c.qk_head_dim : c.kv_lora_rank;
      const int64_t i = r % block - first;
      if (i < 0) return {0, r, false};
      return {0, base + first + (i % 2 == 0 ? i / 2 : dpe / 2 + i / 2), false};
    }
    case HfLayout::kCopy:
    case HfLayout::kTranspose:
      break;
  }
  return {0, r, false};
}

// out (cols x rows) = in (rows x cols) transposed.
void transpose(const float* in, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kB = 64;  // tiles: both sides stay in cache
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i0 = 0; i0 < rows; i0 += kB)
    for (int64_t j0 = 0; j0 < cols; j0 += kB)
      for (int64_t i = i0; i < std::min(rows, i0 + kB); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kB); ++j) out[j * rows + i] = in[i * cols + j];
}

// "<pre><N>.<rest>" -> N and rest.
bool split_index(const std::string& name, const std::string& pre, int64_t* index,
                 std::string* rest) {
  if (name.rfind(pre, 0) != 0) return false;
  const size_t dot = name.find('.', pre.size());
  if (dot == std::string::npos) return false;
  *index = std::stoll(name.substr(pre.size(), dot - pre.size()));
  *rest = name.substr(dot + 1);
  return true;
}

// "decoder.layers.<L>.<suffix>" -> L and suffix.
bool split_layer_name(const std::string& name, int64_t* layer, std::string* suffix) {
  return split_index(name, "decoder.layers.", layer, suffix);
}

// An expert's parameter "mlp.experts.local_experts.<N>.<rest>" (a layer
// suffix) -> N and the rule key "mlp.experts.local_experts.{e}.<rest>".
constexpr const char* kExpertPrefix = "mlp.experts.local_experts.";
bool split_expert(const std::string& suffix, int64_t* expert, std::string* key) {
  std::string rest;
  if (!split_index(suffix, kExpertPrefix, expert, &rest)) return false;
  *key = std::string(kExpertPrefix) + "{e}." + rest;
  return true;
}

// `name` with "{e}" replaced by expert `e`.
std::string with_expert(std::string name, int64_t e) {
  const size_t at = name.find("{e}");
  return at == std::string::npos ? name : name.replace(at, 3, std::to_string(e));
}

using Rule = HfRule;

const std::map<std::string, Rule>& gpt2_layer_rules() {
  static const std::map<std::string, Rule> k = {
      {"input_layernorm.weight", {{"ln_1.weight"}, HfLayout::kCopy}},
      {"input_layernorm.bias", {{"ln_1.bias"}, HfLayout::kCopy}},
      {"self_attention.linear_qkv.weight", {{"attn.c_attn.weight"}, HfLayout::kGpt2Qkv}},
      {"self_attention.linear_qkv.bias", {{"attn.c_attn.bias"}, HfLayout::kGpt2Qkv}},
      {"self_attention.linear_proj.weight", {{"attn.c_proj.weight"}, HfLayout::kTranspose}},
      {"self_attention.linear_proj.bias", {{"attn.c_proj.bias"}, HfLayout::kCopy}},
      {"pre_mlp_layernorm.weight", {{"ln_2.weight"}, HfLayout::kCopy}},
      {"pre_mlp_layernorm.bias", {{"ln_2.bias"}, HfLayout::kCopy}},
      {"mlp.linear_fc1.weight", {{"mlp.c_fc.weight"}, HfLayout::kTranspose}},
      {"mlp.linear_fc1.bias", {{"mlp.c_fc.bias"}, HfLayout::kCopy}},
      {"mlp.linear_fc2.weight", {{"mlp.c_proj.weight"}, HfLayout::kTranspose}},
      {"mlp.linear_fc2.bias", {{"mlp.c_proj.bias"}, HfLayout::kCopy}}};
  return k;
}

const std::map<std::string, Rule>& llama_layer_rules() {
  static const std::map<std::string, Rule> k = {
      {"input_layernorm.weight", {{"input_layernorm.weight"}, HfLayout::kCopy}},
      {"self_attention.linear_qkv.weight",
       {{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
        HfLayout::kLlamaQkv}},
      {"self_attention.linear_proj.weight", {{"self_attn.o_proj.weight"}, HfLayout::kCopy}},
      {"pre_mlp_layernorm.weight", {{"post_attention_layernorm.weight"}, HfLayout::kCopy}},
      {"mlp.linear_fc1.weight", {{"mlp.gate_proj.weight", "mlp.up_proj.weight"},
                                 HfLayout::kGateUp}},
      {"mlp.linear_fc2.weight", {{"mlp.down_proj.weight"}, HfLayout::kCopy}}};
  return k;
}

// An MoE MLP's rules: the router `<block>gate.weight` and each expert's
// `<block>experts.{e}.<gate|up|down>.weight` (fc1 = [gate; up]).
void add_moe_rules(std::map<std::string, Rule>& r, const std::string& block, const char* gate,
                   const char* up, const char* down) {
  const std::string ex = block + "experts.{e}.";
  r.emplace("mlp.router.weight", Rule{{block + "gate.weight"}, HfLayout::kCopy});
  r.emplace("mlp.experts.local_experts.{e}.linear_fc1.weight",
            Rule{{ex + gate + ".weight", ex + up + ".weight"}, HfLayout::kGateUp});
  r.emplace("mlp.experts.local_experts.{e}.linear_fc2.weight",
            Rule{{ex + down + ".weight"}, HfLayout::kCopy});
}

// Llama's attention and norms; the MoE MLP as Mixtral's block_sparse_moe.
const std::map<std::string, Rule>& mixtral_layer_rules() {
  static const std::map<std::string, Rule> k = [] {
    std::map<std::string, Rule> r;
    for (const auto& [name, rule] : llama_layer_rules())
      if (name.rfind("mlp.", 0) != 0) r.emplace(name, rule);
    add_moe_rules(r, "block_sparse_moe.", "w1", "w3", "w2");
    return r;
  }();
  return k;
}

// Qwen3's layer (its dense MLP on the dense layers) and, on the MoE layers,
// Qwen3MoeSparseMoeBlock's router and experts under mlp.
const std::map<std::string, Rule>& qwen3_moe_layer_rules() {
  static const std::map<std::string, Rule> k = [] {
    std::map<std::string, Rule> r = qwen_layer_rules(HfFamily::kQwen3, llama_layer_rules());
    add_moe_rules(r, "mlp.", "gate_proj", "up_proj", "down_proj");
    return r;
  }();
  return k;
}

// DeepSeek's base: Llama's norms and dense MLP, the experts under mlp.; the
// MLA attention, shared experts and expert bias are hf_deepseek.cc's.
const std::map<std::string, Rule>& deepseek_base_rules() {
  static const std::map<std::string, Rule> k = [] {
    std::map<std::string, Rule> r = llama_layer_rules();
    add_moe_rules(r, "mlp.", "gate_proj", "up_proj", "down_proj");
    return r;
  }();
  return k;
}

const std::map<std::string, Rule>& layer_rules(HfFamily f) {
  switch (f) {
    case HfFamily::kGpt2: return gpt2_layer_rules();
    case HfFamily::kLlama:
    case HfFamily::kMistral: return llama_layer_rules();
    case HfFamily::kMixtral: return mixtral_layer_rules();
    case HfFamily::kQwen2:
    case HfFamily::kQwen3: return qwen_layer_rules(f, llama_layer_rules());
    case HfFamily::kQwen3Moe: return qwen3_moe_layer_rules();
    case HfFamily::kDeepseekV3:
    case HfFamily::kDeepseekV2: return deepseek_layer_rules(f, deepseek_base_rules());
  }
  return llama_layer_rules();
}

const std::map<std::string, Rule>& model_rules(HfFamily f) {
  static const std::map<std::string, Rule> gpt2 = {
      {"embedding.word_embeddings.weight", {{"wte.weight"}, HfLayout::kVocab}},
      {"embedding.position_embeddings.weight", {{"wpe.weight"}, HfLayout::kCopy}},
      {"decoder.final_layernorm.weight", {{"ln_f.weight"}, HfLayout::kCopy}},
      {"decoder.final_layernorm.bias", {{"ln_f.bias"}, HfLayout::kCopy}}};
  static const std::map<std::string, Rule> llama = {
      {"embedding.word_embeddings.weight", {{"model.embed_tokens.weight"}, HfLayout::kVocab}},
      {"decoder.final_layernorm.weight", {{"model.norm.weight"}, HfLayout::kCopy}},
      {"output_layer.weight", {{"lm_head.weight"}, HfLayout::kVocab}}};
  return f == HfFamily::kGpt2 ? gpt2 : llama;
}

// Shapes of the HF tensors of parameter p under `layout`.
std::vector<std::vector<int64_t>> hf_shapes(const ParamSpec& p, HfLayout layout,
                                            const ModelConfig& c, int64_t vocab_rows) {
  const int64_t R = p.global_rows, C = p.global_cols;
  const std::vector<int64_t> own = p.ndim == 1 ? std::vector<int64_t>{R} : std::vector<int64_t>{R, C};
  switch (layout) {
    case HfLayout::kCopy: return {own};
    case HfLayout::kTranspose: return {{C, R}};
    case HfLayout::kVocab: return {{vocab_rows, C}};
    case HfLayout::kGpt2Qkv: return {p.ndim == 1 ? own : std::vector<int64_t>{C, R}};
    case HfLayout::kLlamaQkv: {  // weights, or Qwen2's biases
      const int64_t d = c.head_dim(), g = c.query_groups();
      if (p.ndim == 1) return {{c.num_attention_heads * d}, {g * d}, {g * d}};
      return {{c.num_attention_heads * d, C}, {g * d, C}, {g * d, C}};
    }
    case HfLayout::kGateUp: return {{R / 2, C}, {R / 2, C}};
    case HfLayout::kMlaQRopeHalves:
    case HfLayout::kMlaKvRopeHalves: return {own};
  }
  return {own};
}

}  // namespace

int64_t HfTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n = checked_mul(n, s, "elements of tensor '" + name + "'");
  return n;
}

std::vector<HfParamMap> hf_param_maps(HfFamily f, const ParamRegistry& full,
                                      const std::string& gpt2_prefix, int64_t vocab_rows) {
  const ModelConfig& c = full.config();
  if (vocab_rows == 0) vocab_rows = c.vocab_size;
  MT_CHECK(vocab_rows >= c.vocab_size && vocab_rows <= c.padded_vocab_size, "vocabulary rows ",
           vocab_rows, " outside [", c.vocab_size, ", ", c.padded_vocab_size, "]");
  const std::string model_pre = f == HfFamily::kGpt2 ? gpt2_prefix : "";
  std::vector<HfParamMap> out;
  for (const ParamSpec& p : full.params()) {
    int64_t layer = -1;
    std::string suffix, layer_pre;
    const Rule* rule = nullptr;
    int64_t expert = -1;
    int64_t depth = -1;
    std::string rest;
    const bool mtp = split_index(p.name, "mtp.layers.", &depth, &rest);
    const char* kMtpLayer = "transformer_layer.";
    if (mtp && rest.rfind(kMtpLayer, 0) == 0) {  // DeepSeek-V3: a depth is layer L + depth
      layer = c.num_layers + depth;
      suffix = rest.substr(std::strlen(kMtpLayer));
    }
    if (layer >= 0 || split_layer_name(p.name, &layer, &suffix)) {
      std::string key = suffix;
      if (!split_expert(suffix, &expert, &key)) expert = -1;
      const auto it = layer_rules(f).find(key);
      if (it != layer_rules(f).end()) rule = &it->second;
      layer_pre = f == HfFamily::kGpt2 ? gpt2_prefix + "h." + std::to_string(layer) + "."
                                       : "model.layers." + std::to_string(layer) + ".";
    } else if (mtp) {
      if (f == HfFamily::kDeepseekV3) {
        const auto it = deepseek_mtp_rules().find(rest);
        if (it != deepseek_mtp_rules().end()) rule = &it->second;
      }
      layer_pre = "model.layers." + std::to_string(c.num_layers + depth) + ".";
    } else {
      const auto it = model_rules(f).find(p.name);
      if (it != model_rules(f).end()) rule = &it->second;
      layer_pre = model_pre;
    }
    MT_CHECK(rule != nullptr, "parameter '", p.name, "' has no Hugging Face ", hf_family_name(f),
             " name; the model configuration is not a ", hf_family_name(f), " model");
    HfParamMap m;
    m.param = &p;
    m.layout = rule->layout;
    const auto shapes = hf_shapes(p, rule->layout, c, vocab_rows);
    for (size_t i = 0; i < rule->hf.size(); ++i)
      m.hf.push_back({layer_pre + (expert >= 0 ? with_expert(rule->hf[i], expert) : rule->hf[i]),
                      shapes[i]});
    out.push_back(std::move(m));
  }
  return out;
}

void hf_to_megatron(const HfParamMap& m, const ModelConfig& cfg,
                    const std::vector<const float*>& hf, float* full) {
  const ParamSpec& p = *m.param;
  const int64_t R = p.global_rows, C = p.global_cols;
  if (m.layout == HfLayout::kTranspose) {  // HF (C, R) -> (R, C)
    transpose(hf[0], C, R, full);
    return;
  }
  const int64_t vocab_rows = m.hf[0].shape[0];  // read for kVocab only
  std::vector<float> t;
  std::vector<const float*> src = hf;
  if (m.layout == HfLayout::kGpt2Qkv && p.ndim == 2) {  // c_attn (h, 3h): rows of its transpose
    t.resize(size_t(R * C));
    transpose(hf[0], C, R, t.data());
    src = {t.data()};
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const RowSource s = row_source(m.layout, cfg, vocab_rows, R, r);
    std::copy(src[size_t(s.tensor)] + s.row * C, src[size_t(s.tensor)] + (s.row + 1) * C,
              full + r * C);
  }
}

void megatron_to_hf(const HfParamMap& m, const ModelConfig& cfg, const float* full,
                    const std::vector<float*>& hf) {
  const ParamSpec& p = *m.param;
  const int64_t R = p.global_rows, C = p.global_cols;
  if (m.layout == HfLayout::kTranspose) {
    transpose(full, R, C, hf[0]);
    return;
  }
  const bool gpt2_qkv_weight = m.layout == HfLayout::kGpt2Qkv && p.ndim == 2;
  const int64_t vocab_rows = m.hf[0].shape[0];  // read for kVocab only
  std::vector<float> t;
  std::vector<float*> dst = hf;
  if (gpt2_qkv_weight) {
    t.resize(size_t(R * C));
    dst = {t.data()};
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const RowSource s = row_source(m.layout, cfg, vocab_rows, R, r);
    if (s.pad) continue;
    std::copy(full + r * C, full + (r + 1) * C, dst[size_t(s.tensor)] + s.row * C);
  }
  if (gpt2_qkv_weight) transpose(t.data(), R, C, hf[0]);
}

}  // namespace mt
