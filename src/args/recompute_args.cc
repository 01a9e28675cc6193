// Megatron's activation-recompute flags (training/arguments.py and
// TransformerConfig.__post_init__): --recompute-granularity full with a method
// and a layer count, or selective with --recompute-modules (default
// core_attn); the deprecated --moe-layer-recompute is selective with "moe"
// added. Full granularity ignores the modules, as Megatron does.
#include <algorithm>
#include <string>
#include <vector>

#include "args/args.h"
#include "core/error.h"

namespace mt {

namespace {

bool has(const std::vector<std::string>& list, const std::string& word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// Megatron's choices, those this build recomputes (core_attn: the attention
// never keeps its probabilities here, so it is always recomputed; layernorm:
// the input and pre-MLP norms' outputs; moe_act: the experts' activation
// output; shared_experts: the shared expert; mla_up_proj: MLA's per-head q,
// k, v) and what each refused one would drop.
const std::vector<std::string> kHonoured = {"core_attn", "layernorm",      "mla_up_proj", "mlp",
                                            "moe",       "moe_act", "shared_experts"};
struct Refused {
  const char* module;
  const char* what;
};
const Refused kRefused[] = {
    {"gdn_norm_out", "GatedDeltaNet's output norm"},
    {"gdp_in_proj", "GatedDeltaProduct's input projection"},
    {"gdp_qkv", "GatedDeltaProduct's convolution and QKV"},
    {"mhc", "multi-head connections"},
};

void check_module(const std::string& m) {
  if (has(kHonoured, m)) return;
  for (const Refused& r : kRefused)
    MT_CHECK(m != r.module, "--recompute-modules ", m, " (recompute ", r.what,
             ") is not supported by this build; fix: recompute one of ", joined(kHonoured),
             " (moe: the whole MoE layer), or --recompute-granularity full");
  std::vector<std::string> all = kHonoured;
  for (const Refused& r : kRefused) all.push_back(r.module);
  MT_CHECK(false, "--recompute-modules '", m, "' is not one of Megatron-LM's modules (",
           joined(all), ")");
}

}  // namespace

void TrainArgs::validate_recompute() {
  if (moe_layer_recompute) {  // Megatron's TransformerConfig.__post_init__
    MT_CHECK(recompute_granularity != "full", "--moe-layer-recompute with "
             "--recompute-granularity full (Megatron-LM refuses it too: full recompute already "
             "recomputes the MoE layers); fix: leave out one of them");
    recompute_granularity = "selective";
    if (recompute_modules.empty()) recompute_modules = {"core_attn"};
    if (!has(recompute_modules, "moe")) recompute_modules.push_back("moe");
  }
  MT_CHECK(recompute_granularity.empty() || recompute_granularity == "full" ||
               recompute_granularity == "selective",
           "--recompute-granularity '", recompute_granularity, "' is not one of full, selective");
  const int64_t per_stage = model.num_layers / pipeline_model_parallel_size;
  if (recompute_granularity == "full") {
    MT_CHECK(recompute_method == "uniform" || recompute_method == "block",
             "--recompute-granularity full needs --recompute-method uniform or block (got '",
             recompute_method, "')");
    MT_CHECK(recompute_num_layers >= 1 && recompute_num_layers <= per_stage,
             "--recompute-num-layers ", recompute_num_layers, " must be between 1 and the layers "
             "per pipeline stage (", per_stage, ")");
  } else {
    MT_CHECK(recompute_method.empty(), "--recompute-method ", recompute_method,
             " needs --recompute-granularity full (selective recompute has no method)");
  }
  if (recompute_granularity == "selective") {
    for (const std::string& m : recompute_modules) check_module(m);
    // Megatron's TransformerConfig.__post_init__ refuses these two where they
    // do not apply; shared_experts without a shared expert is ignored there
    // (and here), "moe" with moe_act / shared_experts recomputes the whole
    // MoE layer (its checkpoint wraps theirs).
    MT_CHECK(!has(recompute_modules, "moe_act") || model.moe_grouped_gemm,
             "--recompute-modules moe_act needs --moe-grouped-gemm (Megatron-LM supports it only "
             "there); fix: add --moe-grouped-gemm, or leave out moe_act");
    MT_CHECK(!has(recompute_modules, "mla_up_proj") || model.multi_latent_attention,
             "--recompute-modules mla_up_proj needs --multi-latent-attention (Megatron-LM "
             "supports it only there); fix: add --multi-latent-attention, or leave out "
             "mla_up_proj");
    const bool overlap = has(inert_flags, "--moe-shared-expert-overlap");
    MT_CHECK(!has(recompute_modules, "shared_experts") || !overlap ||
                 model.moe_shared_expert_intermediate_size <= 0,
             "--recompute-modules shared_experts with --moe-shared-expert-overlap (Megatron-LM "
             "refuses it too); fix: leave out one of them");
  }
}

Recompute TrainArgs::recompute() const {
  Recompute r;
  if (recompute_granularity == "full") {
    r.method = recompute_method;
    r.num_layers = recompute_num_layers;
  }
  if (recompute_granularity == "selective" || moe_layer_recompute) {
    r.modules = recompute_modules.empty() ? std::vector<std::string>{"core_attn"}
                                          : recompute_modules;
    if (moe_layer_recompute && !has(r.modules, "moe")) r.modules.push_back("moe");
  }
  return r;
}

}  // namespace mt
