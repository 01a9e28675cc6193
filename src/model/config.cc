#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "core/checked_math.h"

#include "core/error.h"
#include "kernels/moe_router.h"
#include "model/blocks/registered_mlp.h"
#include "model/layer_pattern.h"

namespace mt {

namespace {

// --moe-layer-freq as one flag per layer: N → layers 0, N, 2N, ... are MoE;
// a list expression ("[0,1,1,1]", "[0]*3+[1]*5", "([0]+[1]*7)": Megatron's
// moe_freq_type, model/layer_pattern.h) → as listed, one entry per layer.
std::vector<bool> moe_layer_pattern(const std::string& freq, int64_t num_layers) {
  std::vector<bool> out;
  if (freq.find('[') != std::string::npos) {
    for (int64_t x : eval_layer_pattern("--moe-layer-freq", freq)) {
      MT_CHECK(x == 0 || x == 1, "--moe-layer-freq '", freq, "': entry ", x,
               " is not 0 or 1; fix: one 0 (dense) or 1 (MoE) per layer, e.g. [0,1,1,1]");
      out.push_back(x == 1);
    }
    MT_CHECK(int64_t(out.size()) == num_layers, "--moe-layer-freq '", freq, "' has ", out.size(),
             " entries but --num-layers is ", num_layers, "; fix: one 0 or 1 per layer");
    return out;
  }
  int64_t n = 0;
  size_t used = 0;
  try {
    n = std::stoll(freq, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MT_CHECK(used == freq.size() && used > 0 && n > 0, "--moe-layer-freq '", freq,
           "' is neither a positive integer nor a list; fix: give N (every N-th layer is MoE) "
           "or one 0/1 per layer, e.g. [0,1,1,1] or [0]*1+[1]*3");
  for (int64_t l = 0; l < num_layers; ++l) out.push_back(l % n == 0);
  return out;
}

// --window-size "L,R" or "(L,R)" (Megatron's tuple_type) as (L, R); throws
// naming the value and the fix.
std::pair<int64_t, int64_t> parse_window_size(const std::string& text) {
  std::string t = text;
  if (t.size() >= 2 && t.front() == '(' && t.back() == ')') t = t.substr(1, t.size() - 2);
  const size_t comma = t.find(',');
  int64_t v[2] = {0, 0};
  bool ok = comma != std::string::npos && t.find(',', comma + 1) == std::string::npos;
  for (int i = 0; ok && i < 2; ++i) {
    std::string item = i == 0 ? t.substr(0, comma) : t.substr(comma + 1);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    size_t used = 0;
    try {
      v[i] = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ok = used > 0 && used == item.size();
  }
  MT_CHECK(ok, "--window-size '", text, "' is not two integers L,R; fix: give the keys a query "
           "sees before itself and after it, e.g. --window-size 4095,0 (Mistral's sliding_window "
           "4096)");
  MT_CHECK(v[0] >= -1, "--window-size ", text, ": L ", v[0],
           " must be >= 0 (or -1: unbounded); fix: e.g. --window-size 4095,0");
  MT_CHECK(v[1] == 0, "--window-size ", text, ": R ", v[1],
           " is not 0, but the decoder is causal (no query sees a later key); fix: --window-size ",
           v[0], ",0");
  return {v[0], v[1]};
}

}  // namespace

int64_t ModelConfig::window_left() const {
  return window_size.empty() ? -1 : parse_window_size(window_size).first;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (!moe()) return false;
  return moe_layer_pattern(moe_layer_freq, num_layers).at(size_t(layer));
}

ModelConfig resolved_architecture(ModelConfig c) {
  if (c.ffn_hidden_size == 0) c.ffn_hidden_size = 4 * c.hidden_size;
  if (c.max_position_embeddings == 0) c.max_position_embeddings = c.seq_length;
  try {  // --window-size in one spelling ("L,0"; none as "")
    const int64_t left = c.window_left();
    c.window_size = left < 0 ? "" : std::to_string(left) + ",0";
  } catch (const Error&) {
    // not a window: compared as written
  }
  // Query groups by their number alone (heads: none), so that a mismatch
  // names the number; the switch follows from it.
  c.num_query_groups = c.query_groups();
  c.group_query_attention = false;
  if (!c.use_rope_scaling) {  // the scaling's values mean nothing without it
    const ModelConfig d;
    c.rope_scaling_factor = d.rope_scaling_factor;
    c.rope_scaling_low_freq_factor = d.rope_scaling_low_freq_factor;
    c.rope_scaling_high_freq_factor = d.rope_scaling_high_freq_factor;
    c.rope_scaling_original_max_position_embeddings =
        d.rope_scaling_original_max_position_embeddings;
  }
  const ModelConfig dflt;
  if (!c.multi_latent_attention) {  // the MLA fields mean nothing without it
    c.q_lora_rank = dflt.q_lora_rank;
    c.kv_lora_rank = dflt.kv_lora_rank;
    c.qk_head_dim = dflt.qk_head_dim;
    c.qk_pos_emb_head_dim = dflt.qk_pos_emb_head_dim;
    c.v_head_dim = dflt.v_head_dim;
  }
  c.rope_type = c.multi_latent_attention ? c.mla_rope_type() : "";
  if (c.position_embedding_type != "yarn" && c.rope_type != "yarn") {  // nor YaRN's without it
    c.rotary_scaling_factor = dflt.rotary_scaling_factor;
    c.mscale = dflt.mscale;
    c.mscale_all_dim = dflt.mscale_all_dim;
    c.yarn_original_max_position_embeddings = dflt.yarn_original_max_position_embeddings;
    c.yarn_beta_fast = dflt.yarn_beta_fast;
    c.yarn_beta_slow = dflt.yarn_beta_slow;
  }
  if (!c.moe()) {  // no expert anywhere: the MoE fields mean nothing
    const ModelConfig d;
    c.moe_ffn_hidden_size = d.moe_ffn_hidden_size;
    c.moe_layer_freq = d.moe_layer_freq;
    c.moe_shared_expert_intermediate_size = d.moe_shared_expert_intermediate_size;
    c.moe_router_topk = d.moe_router_topk;
    c.moe_router_pre_softmax = d.moe_router_pre_softmax;
    c.moe_router_dtype = d.moe_router_dtype;
    c.moe_router_score_function = d.moe_router_score_function;
    c.moe_router_topk_scaling_factor = d.moe_router_topk_scaling_factor;
    c.moe_router_num_groups = d.moe_router_num_groups;
    c.moe_router_group_topk = d.moe_router_group_topk;
    c.moe_router_enable_expert_bias = d.moe_router_enable_expert_bias;
    return c;
  }
  c.moe_ffn_hidden_size = c.moe_ffn();
  if (c.moe_router_group_topk == 0) c.moe_router_num_groups = 0;  // groups alone: no limit
  try {
    std::string list;
    for (bool moe : moe_layer_pattern(c.moe_layer_freq, c.num_layers))
      list += std::string(list.empty() ? "[" : ",") + (moe ? "1" : "0");
    c.moe_layer_freq = list + "]";
  } catch (const Error&) {
    // not a pattern of these layers: compared as written
  }
  return c;
}

bool is_training_knob(const std::string& k) {
  for (const char* key : {"hidden_dropout", "attention_dropout", "init_method_std", "seq_length",
                          "make_vocab_size_divisible_by", "padded_vocab_size",
                          "moe_router_load_balancing_type", "moe_aux_loss_coeff",
                          "moe_z_loss_coeff", "moe_expert_capacity_factor",
                          "moe_token_drop_policy", "moe_pad_expert_input_to_capacity",
                          "moe_token_dispatcher_type", "moe_grouped_gemm",
                          "moe_router_bias_update_rate", "mtp_loss_scaling_factor"})
    if (k == key) return true;
  return false;
}

void ModelConfig::check_moe_flags() const {
  const bool other = moe_ffn_hidden_size != 0 || moe_shared_expert_intermediate_size != 0 ||
                     moe_aux_loss_coeff != 0.f || moe_z_loss_coeff != 0.f ||
                     moe_expert_capacity_factor >= 0.f || moe_grouped_gemm ||
                     moe_pad_expert_input_to_capacity || !moe_router_dtype.empty() ||
                     moe_router_score_function != "softmax" ||
                     moe_router_topk_scaling_factor != 0.f || moe_router_num_groups != 0 ||
                     moe_router_group_topk != 0 || moe_router_enable_expert_bias;
  MT_CHECK(num_experts >= 0, "--num-experts ", num_experts, " must be > 0 (or left out: dense)");
  if (!moe()) {
    MT_CHECK(!other, "MoE flags (--moe-*) were given without --num-experts; fix: pass "
             "--num-experts N for a mixture-of-experts model, or drop the --moe-* flags");
    return;
  }
  MT_CHECK(moe_ffn_hidden_size >= 0, "--moe-ffn-hidden-size ", moe_ffn_hidden_size,
           " must be > 0 (or left out: --ffn-hidden-size)");
  MT_CHECK(moe_shared_expert_intermediate_size >= 0, "--moe-shared-expert-intermediate-size ",
           moe_shared_expert_intermediate_size, " must be > 0 (or left out: no shared expert)");
  MT_CHECK(moe_router_topk >= 1 && moe_router_topk <= num_experts, "--moe-router-topk ",
           moe_router_topk, " must be in [1, --num-experts ", num_experts,
           "]; fix: route each token to at most as many experts as there are");
  MT_CHECK(moe_router_dtype != "fp64", "--moe-router-dtype fp64 is not supported by megatron.cpp "
           "(the router computes in fp32 at most); fix: --moe-router-dtype fp32");
  MT_CHECK(moe_router_dtype.empty() || moe_router_dtype == "fp32", "--moe-router-dtype '",
           moe_router_dtype, "' is not one of fp32, fp64; fix: --moe-router-dtype fp32, or leave "
           "the flag out (the router computes in the run's dtype)");
  MT_CHECK(moe_router_load_balancing_type == "aux_loss" ||
               moe_router_load_balancing_type == "seq_aux_loss" ||
               moe_router_load_balancing_type == "none",
           "--moe-router-load-balancing-type '", moe_router_load_balancing_type,
           "' is not one of aux_loss, seq_aux_loss, none (sinkhorn is not implemented)");
  check_moe_routing_flags();
  MT_CHECK(std::isfinite(moe_aux_loss_coeff) && moe_aux_loss_coeff >= 0, "--moe-aux-loss-coeff ",
           moe_aux_loss_coeff, " must be a finite number >= 0");
  MT_CHECK(std::isfinite(moe_z_loss_coeff) && moe_z_loss_coeff >= 0, "--moe-z-loss-coeff ",
           moe_z_loss_coeff, " must be a finite number >= 0");
  // Megatron's TransformerConfig turns any negative factor into None
  // (dropless); NaN and inf it takes, and get_capacity's ceil() fails on them.
  const float cf = moe_expert_capacity_factor;
  MT_CHECK(!std::isnan(cf) && cf != std::numeric_limits<float>::infinity(),
           "--moe-expert-capacity-factor ", cf, " is not a finite number (an expert takes at most "
           "factor x tokens x topk / experts tokens); fix: give a factor > 0 such as 1.0, or "
           "leave the flag out for dropless routing");
  MT_CHECK(cf != 0, "--moe-expert-capacity-factor 0 gives every expert a capacity of 0 tokens "
           "(all dropped); fix: give a factor > 0 such as 1.0, or leave the flag out for dropless "
           "routing");
  MT_CHECK(moe_token_drop_policy == "probs" || moe_token_drop_policy == "position",
           "--moe-token-drop-policy '", moe_token_drop_policy, "' is not one of probs, position");
  MT_CHECK(!moe_pad_expert_input_to_capacity || moe_expert_capacity_factor > 0,
           "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor; fix: give a "
           "capacity factor or drop the flag");
  MT_CHECK(moe_token_dispatcher_type == "allgather" || moe_token_dispatcher_type == "alltoall",
           "--moe-token-dispatcher-type '", moe_token_dispatcher_type,
           "' is not one of allgather, alltoall (flex and alltoall_seq are not implemented)");
  // Megatron builds every layer dense for a pattern without a 1 (and says
  // nothing): a model of --num-experts with no expert anywhere.
  const std::vector<bool> pattern = moe_layer_pattern(moe_layer_freq, num_layers);
  MT_CHECK(std::find(pattern.begin(), pattern.end(), true) != pattern.end(), "--num-experts ",
           num_experts, " with --moe-layer-freq ", moe_layer_freq,
           " makes no layer MoE: the model would train dense; fix: put a 1 in --moe-layer-freq "
           "for each MoE layer (e.g. --moe-layer-freq 1 for all), or leave out --num-experts for "
           "a dense model");
}

// DeepSeek-V3's routing flags, with Megatron's TransformerConfig checks and
// the kernels' (kernels/moe_router.h).
void ModelConfig::check_moe_routing_flags() const {
  MT_CHECK(moe_router_score_function == "softmax" || moe_router_score_function == "sigmoid",
           "--moe-router-score-function '", moe_router_score_function,
           "' is not one of softmax, sigmoid (sqrtsoftplus is not implemented)");
  const float f = moe_router_topk_scaling_factor;
  MT_CHECK(std::isfinite(f) && f >= 0, "--moe-router-topk-scaling-factor ", f,
           " must be a finite number > 0; fix: give a factor such as 2.5, or leave it out");
  MT_CHECK(!moe_router_enable_expert_bias || moe_router_score_function == "sigmoid",
           "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid (as in "
           "Megatron-LM); fix: add --moe-router-score-function sigmoid, or drop the bias");
  const float rate = moe_router_bias_update_rate;
  MT_CHECK(std::isfinite(rate) && rate >= 0, "--moe-router-bias-update-rate ", rate,
           " must be a finite number >= 0; fix: give a rate such as 1e-3");
  MT_CHECK(moe_router_num_groups >= 0 && moe_router_group_topk >= 0,
           "--moe-router-num-groups ", moe_router_num_groups, " and --moe-router-group-topk ",
           moe_router_group_topk, " must be > 0 (or left out: no group limit)");
  if (moe_router_group_topk == 0) return;  // Megatron reads the groups only with a group top-k
  const int64_t G = moe_router_num_groups, g = moe_router_group_topk, k = moe_router_topk;
  MT_CHECK(G > 0, "--moe-router-group-topk ", g, " without --moe-router-num-groups; fix: add "
           "--moe-router-num-groups G (G divides --num-experts)");
  MT_CHECK(G <= kMoeMaxGroups && num_experts % G == 0, "--moe-router-num-groups ", G,
           " does not divide --num-experts ", num_experts, " or is over ", kMoeMaxGroups,
           "; fix: choose a number of groups that divides the experts");
  MT_CHECK(g <= G, "--moe-router-group-topk ", g, " is over --moe-router-num-groups ", G,
           "; fix: choose at most as many groups as there are");
  MT_CHECK(g <= k && g * (num_experts / G) >= k, "--moe-router-group-topk ", g,
           " with --moe-router-topk ", k, " and ", num_experts / G, " experts a group: each "
           "group is ranked by its top topk/group-topk scores and the chosen groups must hold "
           "topk experts; fix: choose a group top-k in [", (k + num_experts / G - 1) /
           (num_experts / G), ", ", std::min(k, G), "]");
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size) {
  MT_CHECK(divisible_by > 0, "--make-vocab-size-divisible-by ", divisible_by, " must be > 0");
  const int64_t multiple =
      checked_mul(divisible_by, tp_size, "--make-vocab-size-divisible-by x TP");
  const int64_t padded = checked_add(vocab_size, multiple - 1,
                                   "the padded vocabulary size (--make-vocab-size-divisible-by)");
  return padded / multiple * multiple;
}

void ModelConfig::check_flag_ranges() const {
  MT_CHECK(num_layers > 0, "--num-layers ", num_layers, " must be > 0");
  MT_CHECK(hidden_size > 0, "--hidden-size ", hidden_size, " must be > 0");
  MT_CHECK(ffn_hidden_size >= 0, "--ffn-hidden-size ", ffn_hidden_size,
           " must be > 0; fix: give a positive size, or leave it out for 4 x --hidden-size");
  MT_CHECK(num_attention_heads > 0, "--num-attention-heads ", num_attention_heads,
           " must be > 0");
  MT_CHECK(kv_channels >= 0, "--kv-channels ", kv_channels,
           " must be > 0; fix: give the head size, or leave it out for hidden-size / "
           "num-attention-heads");
  MT_CHECK(kv_channels > 0 || hidden_size % num_attention_heads == 0, "--hidden-size ",
           hidden_size, " is not divisible by --num-attention-heads ", num_attention_heads,
           "; fix: choose heads that divide the hidden size, or give the head size with "
           "--kv-channels");
  MT_CHECK(seq_length > 0, "--seq-length ", seq_length, " must be > 0");
  MT_CHECK(max_position_embeddings >= 0, "--max-position-embeddings ", max_position_embeddings,
           " must be > 0; fix: give at least --seq-length, or leave it out");
  MT_CHECK(max_position_embeddings == 0 || max_position_embeddings >= seq_length,
           "--max-position-embeddings ", max_position_embeddings, " is smaller than --seq-length ",
           seq_length, "; fix: raise --max-position-embeddings");
  MT_CHECK(make_vocab_size_divisible_by > 0, "--make-vocab-size-divisible-by ",
           make_vocab_size_divisible_by, " must be > 0 (e.g. 128)");
  MT_CHECK(std::isfinite(init_method_std) && init_method_std > 0, "--init-method-std ",
           init_method_std, " must be a finite number > 0 (e.g. 0.02)");
  MT_CHECK(hidden_dropout >= 0 && hidden_dropout < 1, "--hidden-dropout ", hidden_dropout,
           " must be in [0, 1)");
  MT_CHECK(attention_dropout >= 0 && attention_dropout < 1, "--attention-dropout ",
           attention_dropout, " must be in [0, 1)");
  MT_CHECK(std::isfinite(layernorm_epsilon) && layernorm_epsilon > 0, "--layernorm-epsilon ",
           layernorm_epsilon, " must be a finite number > 0 (e.g. 1e-5)");
  MT_CHECK(normalization == "LayerNorm" || normalization == "RMSNorm", "--normalization '",
           normalization, "' is not one of LayerNorm, RMSNorm");
  MT_CHECK(position_embedding_type == "learned_absolute" || position_embedding_type == "rope" ||
               position_embedding_type == "yarn" || position_embedding_type == "none",
           "--position-embedding-type '", position_embedding_type,
           "' is not one of learned_absolute, rope, yarn, none");
  MT_CHECK(std::isfinite(rotary_base) && rotary_base > 1, "--rotary-base ", rotary_base,
           " must be a finite number > 1 (e.g. 10000)");
  MT_CHECK(std::isfinite(rotary_percent) && rotary_percent > 0 && rotary_percent <= 1,
           "--rotary-percent ", rotary_percent, " must be in (0, 1]");
  if (rope() && !multi_latent_attention) {
    const int64_t rot = int64_t(float(head_dim()) * rotary_percent);
    MT_CHECK(rot >= 2 && rot % 2 == 0, "--rotary-percent ", rotary_percent, " of head dim ",
             head_dim(), " rotates ", rot,
             " features; RoPE needs an even number >= 2; fix: choose --rotary-percent so that "
             "head_dim x percent is even");
  }
  MT_CHECK(!use_rope_scaling || position_embedding_type == "rope",
           "--use-rope-scaling scales RoPE's frequencies but --position-embedding-type is ",
           position_embedding_type,
           "; fix: add --position-embedding-type rope, or leave out --use-rope-scaling");
  check_rope_scaling(rope_scaling());
  check_mla_flags();
  // Megatron's core_transformer_config_from_args asserts this (one activation per MLP).
  MT_CHECK(!(squared_relu && swiglu), "--squared-relu and --swiglu were both given, but the MLP "
           "has one activation (Megatron-LM refuses the pair too); fix: drop one of them");
  MT_CHECK(mlp_kind.empty() || (!swiglu && !squared_relu), "--mlp-kind ", mlp_kind,
           " is a registered block with its own activation, but --",
           swiglu ? "swiglu" : "squared-relu", " was given too; fix: drop that flag");
  MT_CHECK(padded_vocab_size >= 0, "--padded-vocab-size ", padded_vocab_size,
           " must be > 0; fix: give the model's vocabulary rows, or leave it out to pad the "
           "tokenizer's by --make-vocab-size-divisible-by x TP");
  MT_CHECK(num_query_groups > 0, "--num-query-groups ", num_query_groups, " must be > 0");
  MT_CHECK(!group_query_attention || num_attention_heads % num_query_groups == 0,
           "--num-attention-heads ", num_attention_heads, " is not divisible by --num-query-groups ",
           num_query_groups, "; fix: choose groups that divide the heads");
  if (!window_size.empty()) parse_window_size(window_size);  // throws naming the fix
  check_moe_flags();
  MT_CHECK(mtp_num_layers >= 0, "--mtp-num-layers ", mtp_num_layers,
           " must be >= 0 (0 or left out: no multi-token prediction)");
  // Megatron's validate_args: MTP takes rope or none (its first check refuses
  // learned_absolute; the MTP embedding has no position table here).
  MT_CHECK(mtp_num_layers == 0 || !learned_positions(), "--mtp-num-layers ", mtp_num_layers,
           " with --position-embedding-type learned_absolute: Megatron-LM's multi-token "
           "prediction takes rope or none; fix: add --position-embedding-type rope");
  // The attention's widths, (a + 2g)·d and a·d, before anything multiplies them.
  if (multi_latent_attention) mla_attention_parameters(*this);  // throws if it overflows
  const int64_t qkv_heads =
      checked_add(num_attention_heads, checked_mul(2, query_groups(), "--num-query-groups x 2"),
                  "--num-attention-heads + 2 x --num-query-groups");
  checked_mul(qkv_heads, head_dim(),
              kv_channels > 0 ? "the QKV rows ((heads + 2 x groups) x --kv-channels)"
                              : "the QKV rows ((heads + 2 x groups) x --hidden-size / heads)");
  const int64_t ffn = ffn_hidden_size > 0
                          ? ffn_hidden_size
                          : checked_mul(4, hidden_size, "the default --ffn-hidden-size (4 x "
                                                        "--hidden-size)");
  parameters_without_vocab(*this, ffn);  // throws if the parameter count overflows
}

void ModelConfig::finalize(int64_t tp_size) {
  // Megatron's MLA sizes its heads by --qk-head-dim, --qk-pos-emb-head-dim and
  // --v-head-dim and never reads --kv-channels (its DeepSeek scripts pass one):
  // dropped, so the configuration is one either way.
  if (multi_latent_attention) kv_channels = 0;
  check_flag_ranges();
  if (ffn_hidden_size == 0) ffn_hidden_size = 4 * hidden_size;
  // --kv-channels equal to Megatron's default is the default: one model, one
  // configuration (checkpoints of it compare equal either way).
  if (kv_channels > 0 && kv_channels * num_attention_heads == hidden_size) kv_channels = 0;
  if (max_position_embeddings == 0) max_position_embeddings = seq_length;
  if (window_left() < 0) window_size.clear();  // one spelling: "-1,0" is no window
  else window_size = std::to_string(window_left()) + ",0";
  if (moe_expert_capacity_factor < 0) moe_expert_capacity_factor = -1.f;  // one spelling of None
  MT_CHECK(vocab_size > 0, "vocabulary size ", vocab_size,
           " must be > 0; fix: pass --vocab-file or --vocab-size");
  if (padded_vocab_size > 0) {  // --padded-vocab-size: used as given (Megatron's build_tokenizer)
    MT_CHECK(padded_vocab_size >= vocab_size, "--padded-vocab-size ", padded_vocab_size,
             " is smaller than the tokenizer's vocabulary of ", vocab_size,
             " tokens; fix: give at least ", vocab_size, ", or leave it out");
    MT_CHECK(padded_vocab_size % tp_size == 0, "--padded-vocab-size ", padded_vocab_size,
             " is not divisible by --tensor-model-parallel-size ", tp_size,
             " (each rank holds an equal slice of the vocabulary); fix: give a multiple of ",
             tp_size, " such as ", mt::padded_vocab_size(padded_vocab_size, 1, tp_size),
             ", or leave it out");
  } else {
    padded_vocab_size = mt::padded_vocab_size(vocab_size, make_vocab_size_divisible_by, tp_size);
  }
  count_parameters(*this);  // throws if it overflows
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << "layers " << num_layers << ", hidden " << hidden_size << ", heads "
     << num_attention_heads;
  if (group_query_attention) os << " (" << num_query_groups << " query groups)";
  if (kv_channels > 0) os << ", head size " << kv_channels;
  if (multi_latent_attention) {
    os << ", MLA (";
    if (q_lora_rank > 0) os << "q rank " << q_lora_rank << ", ";
    os << "kv rank " << kv_lora_rank << ", heads " << qk_head_dim << "+" << qk_pos_emb_head_dim
       << "/" << v_head_dim << ", " << mla_rope_type() << ")";
  }
  if (qk_layernorm) os << ", q/k " << (multi_latent_attention ? "latent " : "") << normalization;
  if (position_embedding_type == "yarn" || (multi_latent_attention && mla_rope_type() == "yarn"))
    os << ", YaRN x" << rotary_scaling_factor << " (" << yarn_original_max_position_embeddings
       << ")";
  if (add_qkv_bias && disable_bias_linear) os << ", QKV bias";
  if (use_rope_scaling)
    os << ", RoPE scaling x" << rope_scaling_factor << " (" << rope_scaling_low_freq_factor << ", "
       << rope_scaling_high_freq_factor << ", " << rope_scaling_original_max_position_embeddings
       << ")";
  if (window_left() >= 0) os << ", window " << window_left() << ",0";
  if (apply_layernorm_1p) os << ", norms 1p";
  os << ", ffn " << ffn_hidden_size << (swiglu ? " SwiGLU" : "")
     << (squared_relu ? " squared ReLU" : "")
     << (mlp_kind.empty() ? "" : " registered MLP '" + mlp_kind + "'") << ", seq " << seq_length
     << ", vocab " << vocab_size << " (padded " << padded_vocab_size << ")";
  if (rms_norm() || !learned_positions() || disable_bias_linear || !tied_output())
    os << ", " << normalization << ", positions " << position_embedding_type
       << (disable_bias_linear ? ", no linear biases" : "")
       << (tied_output() ? "" : ", untied output layer");
  return os.str();
}

int64_t parameters_without_vocab(const ModelConfig& c, int64_t ffn) {
  constexpr std::string_view what =
      "parameter count (--num-layers, --hidden-size, --ffn-hidden-size, --num-experts, "
      "--max-position-embeddings)";
  const int64_t h = c.hidden_size, qkv = c.qkv_rows(), hq = c.query_projection_size();
  const int64_t norm = c.rms_norm() ? h : 2 * h;  // weight (and bias)
  const int64_t qk_norm = c.qk_layernorm ? (c.rms_norm() ? 2 : 4) * c.head_dim() : 0;
  // An MLP of hidden size f: fc1 (fc1_rows x h), fc2 (h x f), their biases.
  auto mlp = [&](int64_t f) {
    const int64_t fc1 = c.fc1_rows(f);
    const int64_t w = checked_mul(checked_add(fc1, f, what), h, what);
    return c.add_bias() ? checked_add(w, fc1 + h, what) : w;
  };
  // Attention: QKV (qkv x h), projection (h x a·d), their biases, the q/k
  // norms (d each); two norms.
  int64_t common = checked_mul(qkv + hq, h, what);
  if (c.qkv_bias()) common = checked_add(common, qkv, what);
  if (c.add_bias()) common = checked_add(common, h, what);
  common = checked_add(common, qk_norm, what);
  if (c.multi_latent_attention) common = mla_attention_parameters(c);
  common = checked_add(common, 2 * norm, what);
  // A registered block (--mlp-kind) counts the parameters it declares.
  const int64_t dense_mlp = c.mlp_kind.empty() ? mlp(ffn) : registered_mlp_parameters(c, ffn);
  const int64_t dense = checked_add(common, dense_mlp, what);
  int64_t moe = dense;
  if (c.moe()) {  // router (E x h), E experts, the shared expert
    const int64_t fm = c.moe_ffn_hidden_size > 0 ? c.moe_ffn_hidden_size : ffn;
    moe = checked_add(common, checked_mul(c.num_experts, h, what), what);
    moe = checked_add(moe, checked_mul(c.num_experts, mlp(fm), what), what);
    if (c.moe_shared_expert_intermediate_size > 0)
      moe = checked_add(moe, mlp(c.moe_shared_expert_intermediate_size), what);
  }
  int64_t layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l)
    layers = checked_add(layers, c.is_moe_layer(l) ? moe : dense, what);
  // Each MTP depth: a layer of the last layer's kind, enorm, hnorm, final
  // norm and eh_proj (h x 2h).
  const int64_t mtp_depth = checked_add(c.is_moe_layer(c.num_layers - 1) ? moe : dense,
                                        checked_add(3 * norm, checked_mul(2 * h, h, what), what),
                                        what);
  layers = checked_add(layers, checked_mul(c.mtp_num_layers, mtp_depth, what), what);
  const int64_t positions =
      c.learned_positions() ? std::max(c.max_position_embeddings, c.seq_length) : 0;
  return checked_add(checked_add(layers, checked_mul(positions, h, what), what), norm, what);
}

int64_t count_parameters(const ModelConfig& c) {
  const int64_t embedding = checked_mul(c.padded_vocab_size, c.hidden_size,
                                        "parameters of the word embedding (vocabulary x "
                                        "--hidden-size)");
  const int64_t vocab = c.tied_output() ? embedding : checked_mul(2, embedding, "parameter count");
  return checked_add(parameters_without_vocab(c, c.ffn_hidden_size), vocab, "parameter count");
}

}  // namespace mt
