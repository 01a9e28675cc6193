#include "wizard/config_questions.h"

#include <algorithm>

#include "wizard/named_models.h"
#include "core/error.h"

namespace mt {

namespace {

struct AnswerKey {
  const char* key;
  const char* help;
};

// Every question, in the order asked (those in brackets only in that case).
const std::vector<AnswerKey> kKeys = {
    {"device", "device profile: cpu-here, a100-80gb, h100-80gb (configs/devices) or FILE.json"},
    {"machines", "how many machines"},
    {"processes-per-machine", "ranks per machine"},
    {"threads-per-process", "OMP_NUM_THREADS of each rank (the launch line)"},
    {"memory-per-process-gb", "GB one rank may hold (default: the profile's)"},
    {"model", "a named size (listed below) or custom"},
    {"architecture",
     "(custom) gpt2 (LayerNorm, learned positions, GELU, biases, tied) or llama "
     "(RMSNorm, RoPE, SwiGLU, no biases, untied)"},
    {"num-layers", "(custom) transformer layers"},
    {"hidden-size", "(custom) hidden size"},
    {"num-attention-heads", "(custom) attention heads (dividing the hidden size)"},
    {"num-query-groups", "(custom) key/value heads (dividing the heads; = heads: no GQA)"},
    {"ffn-hidden-size", "(custom) MLP hidden size"},
    {"vocab-size", "(custom) vocabulary (the tokenizer's)"},
    {"seq-length", "sequence length (at most the model's context)"},
    {"global-batch-size", "sequences per iteration"},
    {"layout", "1..5: one of the fastest layouts that fit, or hand"},
    {"tensor-model-parallel-size", "(hand) TP"},
    {"sequence-parallel", "(hand, TP > 1) yes or no"},
    {"pipeline-model-parallel-size", "(hand) PP; DP is the ranks left"},
    {"expert-model-parallel-size", "(hand, MoE models) EP"},
    {"micro-batch-size", "(hand) sequences per micro-batch"},
    {"recompute", "(hand) selective or full"},
    {"distributed-optimizer", "(hand) no, ZeRO-1, ZeRO-2 or ZeRO-3"},
    {"precision", "(hand) bf16 or fp32"},
};

std::string divides(int64_t a, const char* what_a, int64_t b, const char* what_b) {
  if (a % b == 0) return "";
  return "the " + std::to_string(a) + " " + what_a + " are not divisible by " + what_b + " " +
         std::to_string(b);
}

// The sizes of a model of neither table: GPT-2's block or Llama's.
ModelConfig ask_custom_model(Prompter& p) {
  ModelConfig m;
  Question arch{"architecture", "Architecture", "gpt2", {"gpt2", "llama"}, {}};
  arch.notes = {"LayerNorm, learned positions, GELU, biases, tied output layer",
                "RMSNorm, RoPE, SwiGLU, no biases, untied output layer"};
  const bool llama = p.ask(arch) == "llama";
  m.num_layers = p.ask_int("num-layers", "Layers", 12);
  m.hidden_size = p.ask_int("hidden-size", "Hidden size", 768);
  m.num_attention_heads = p.ask_int("num-attention-heads", "Attention heads", 12, [&](int64_t a) {
    return divides(m.hidden_size, "hidden features", a, "the heads");
  });
  const int64_t groups = p.ask_int(
      "num-query-groups", "Key/value heads (query groups; = heads: no grouped-query attention)",
      m.num_attention_heads,
      [&](int64_t g) { return divides(m.num_attention_heads, "heads", g, "the query groups"); });
  m.group_query_attention = groups < m.num_attention_heads;
  m.num_query_groups = m.group_query_attention ? groups : 1;
  // GPT-2's 4h; Llama's 8h/3 rounded up to a multiple of 64.
  const int64_t ffn = llama ? (8 * m.hidden_size / 3 + 63) / 64 * 64 : 4 * m.hidden_size;
  m.ffn_hidden_size = p.ask_int("ffn-hidden-size", "MLP hidden size", ffn);
  m.vocab_size = p.ask_int("vocab-size", "Vocabulary size (the tokenizer's)", 50257);
  if (llama) {
    m.normalization = "RMSNorm";
    m.position_embedding_type = "rope";
    m.swiglu = true;
    m.disable_bias_linear = true;
    m.untie_embeddings_and_output_weights = true;
    m.hidden_dropout = m.attention_dropout = 0.f;
  }
  m.seq_length = 1024;
  return m;
}

}  // namespace

ModelConfig ask_model(Prompter& p, std::string* name) {
  Question q{"model", "Model", "gpt2-small", {}, {}};
  for (const NamedModel& m : named_models()) {
    q.choices.push_back(m.name);
    q.notes.push_back(std::string("(") + m.source + ")");
  }
  q.choices.push_back("custom");
  q.notes.push_back("sizes asked next");
  *name = p.ask(q);
  const NamedModel* named = find_named_model(*name);
  ModelConfig m = named != nullptr ? named_model_config(*named) : ask_custom_model(p);
  const int64_t context = named != nullptr ? m.max_position_embeddings : 0;
  m.seq_length = p.ask_int("seq-length", "Sequence length", default_seq_length(m), [&](int64_t s) {
    if (context > 0 && s > context)
      return *name + "'s context is " + std::to_string(context) +
             " positions (max_position_embeddings); give at most that";
    return std::string();
  });
  ModelConfig check = m;
  check.finalize(1);  // throws naming the flag if the answers still disagree
  return m;
}

int64_t ask_global_batch(Prompter& p, const PlanProblem& pb) {
  return p.ask_int(
      "global-batch-size", "Global batch size (sequences per iteration)", 8 * pb.world,
      [&](int64_t b) {
        PlanProblem probe = pb;
        probe.global_batch_size = b;
        std::vector<std::string> rejected;
        if (!enumerate_layouts(probe, {}, &rejected).empty()) return std::string();
        return "no layout of " + std::to_string(pb.world) + " ranks can run it: " +
               (rejected.empty() ? std::string("none divides") : error_reason(rejected[0]));
      });
}

const std::vector<std::string>& config_answer_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const AnswerKey& a : kKeys) k.push_back(a.key);
    return k;
  }();
  return keys;
}

std::string config_answer_key_list() {
  std::string s;
  for (const AnswerKey& a : kKeys) s += (s.empty() ? "" : ", ") + std::string(a.key);
  return s;
}

std::string config_answer_help() {
  std::string s;
  for (const AnswerKey& a : kKeys) {
    std::string key = a.key;
    key.resize(std::max<size_t>(key.size(), 30), ' ');
    s += "  " + key + a.help + "\n";
  }
  std::string names;
  for (const NamedModel& m : named_models())
    names += (names.empty() ? "" : ", ") + std::string(m.name);
  return s + "Named sizes (their Hugging Face config.json): " + names + "\n";
}

}  // namespace mt
