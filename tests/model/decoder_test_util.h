// Tiny models and a continuous-batching schedule shared by the batched
// decoder's tests (tests/model/batched_decoder_test.cc, and under mpirun
// tests/model_mpi/batched_decoder_tp_test.cc): each text fed alone through a
// GptDecoder gives the reference logits; the schedule feeds the texts through
// a BatchedDecoder (prompts in chunks of rows, single decode rows, sequences
// joining as others leave) and compares every row with the reference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/batched_decoder.h"
#include "model/gpt_decoder.h"

namespace mt {

inline ModelConfig tiny_gpt2() {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 32;
  cfg.num_attention_heads = 4;
  cfg.seq_length = 10;
  cfg.max_position_embeddings = 24;
  cfg.vocab_size = 30;
  cfg.make_vocab_size_divisible_by = 16;
  cfg.init_method_std = 0.1f;
  return cfg;
}

// `cfg` made Llama-shaped: RoPE, grouped-query attention, SwiGLU, RMSNorm, no
// biases, untied output.
inline ModelConfig llama_shape(ModelConfig cfg) {
  cfg.normalization = "RMSNorm";
  cfg.position_embedding_type = "rope";
  cfg.swiglu = true;
  cfg.ffn_hidden_size = 48;
  cfg.group_query_attention = true;
  cfg.num_query_groups = 2;
  cfg.disable_bias_linear = true;
  cfg.untie_embeddings_and_output_weights = true;
  return cfg;
}

inline ModelConfig tiny_llama() { return llama_shape(tiny_gpt2()); }

// The Llama shape with an MoE MLP in every layer: 4 experts, top-2, a shared expert.
inline ModelConfig tiny_moe() {
  ModelConfig cfg = tiny_llama();
  cfg.num_experts = 4;
  cfg.moe_ffn_hidden_size = 20;
  cfg.moe_layer_freq = "[1,1]";
  cfg.moe_router_topk = 2;
  cfg.moe_shared_expert_intermediate_size = 16;
  return cfg;
}

// `cfg` with multi-latent attention (V3's: the q latent, its latent norms,
// YaRN with mscale) instead of grouped-query attention.
inline ModelConfig with_mla(ModelConfig cfg) {
  cfg.group_query_attention = false;
  cfg.multi_latent_attention = true;
  cfg.q_lora_rank = 12;
  cfg.kv_lora_rank = 8;
  cfg.qk_head_dim = 8;
  cfg.qk_pos_emb_head_dim = 4;
  cfg.v_head_dim = 6;
  cfg.qk_layernorm = true;
  cfg.rotary_scaling_factor = 4.f;
  cfg.mscale = 0.9f;
  cfg.mscale_all_dim = 0.7f;
  return cfg;
}

// The Llama shape with multi-latent attention.
inline ModelConfig tiny_mla() {
  ModelConfig cfg = with_mla(tiny_llama());
  cfg.yarn_original_max_position_embeddings = 8;
  return cfg;
}

// This rank's parameters: the registry's initial values, plus on every norm
// and bias a perturbation keyed by (name, global index), so that the shards
// of any TP layout hold slices of the same model.
inline std::vector<float> decoder_test_params(const ParamRegistry& reg) {
  std::vector<float> p(size_t(reg.total_floats()));
  reg.initialize(p.data(), 11);
  for (const ParamSpec& s : reg.params()) {
    if (s.init == Init::kNormal || s.ndim != 1 || s.row_blocks != 1) continue;
    const double key = double(std::hash<std::string>{}(s.name) % 1000);
    for (int64_t i = 0; i < s.numel(); ++i)
      p[size_t(s.offset + i)] += float(0.1 * std::sin(1.7 * double(s.row_offset + i) + key));
  }
  return p;
}

// n texts of the given lengths, random tokens below `vocab`.
inline std::vector<std::vector<int32_t>> random_texts(const std::vector<int64_t>& lengths,
                                                      int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::vector<int32_t>> texts;
  for (int64_t n : lengths) {
    texts.emplace_back();
    for (int64_t i = 0; i < n; ++i) texts.back().push_back(int32_t(gen() % uint32_t(vocab)));
  }
  return texts;
}

// Each text fed alone through a GptDecoder: [text][pos · vocab_rows + j].
inline std::vector<std::vector<float>> alone_logits(
    const ParamRegistry& reg, const float* params, const std::vector<std::vector<int32_t>>& texts,
    const TensorParallel& tp = TensorParallel{}, const Communicator* ep = nullptr) {
  GptDecoder dec(reg, params, tp, 0, ep);
  const int64_t v = reg.config().padded_vocab_size;
  std::vector<std::vector<float>> out;
  for (const auto& text : texts) {
    dec.reset();
    out.emplace_back();
    for (int32_t t : text) {
      const float* l = dec.step(t);
      out.back().insert(out.back().end(), l, l + v);
    }
  }
  return out;
}

// Largest |got - want| over a row, relative to the row's largest |want|.
inline double row_rel_error(const float* got, const float* want, int64_t v) {
  double err = 0, scale = 0;
  for (int64_t j = 0; j < v; ++j) {
    err = std::max(err, std::fabs(double(got[j]) - double(want[j])));
    scale = std::max(scale, std::fabs(double(want[j])));
  }
  return err / std::max(scale, 1e-30);
}

struct ScheduleReport {
  double worst = 0;              // worst row's relative error against the reference
  int64_t steps = 0, rows = 0;
  int64_t widest_step = 0;       // most rows in one step
  int64_t longest_chunk = 0;     // most rows of one sequence in one step
  int64_t mixed_steps = 0;       // steps with prefill chunks and single decode rows together
  int64_t joined_late = 0;       // sequences added after the first step
  int64_t reused_blocks = 0;     // blocks held by two texts in turn
};

// Feeds `texts` through `dec`: up to max_sequences live; each step a live
// sequence still in its prompt (the first prompt[i] tokens) gives a chunk of
// up to `chunk` rows, one past its prompt a single row; a sequence whose text
// is all fed is freed and the next text joins. Every row's logits are
// compared with ref[text][position].
inline ScheduleReport run_schedule(BatchedDecoder& dec,
                                   const std::vector<std::vector<int32_t>>& texts,
                                   const std::vector<int64_t>& prompt,
                                   const std::vector<std::vector<float>>& ref, int64_t chunk) {
  ScheduleReport rep;
  const int64_t v = dec.vocab_rows();
  std::deque<size_t> waiting;
  for (size_t i = 0; i < texts.size(); ++i) waiting.push_back(i);
  std::map<int64_t, size_t> live;  // sequence → text
  std::map<int32_t, std::set<size_t>> holders;  // block → texts that held it
  while (!waiting.empty() || !live.empty()) {
    while (!waiting.empty())
      if (std::optional<int64_t> seq = dec.add_sequence()) {
        live[*seq] = waiting.front();
        waiting.pop_front();
        rep.joined_late += rep.steps > 0;
      } else {
        break;
      }
    std::vector<DecodeToken> rows;
    std::vector<std::pair<size_t, int64_t>> where;  // (text, position) of each row
    bool chunked = false, single = false;
    for (auto [seq, text] : live) {
      const int64_t fed = dec.length(seq), n = int64_t(texts[text].size());
      const int64_t take = fed < prompt[text] ? std::min(chunk, prompt[text] - fed) : 1;
      const int64_t room = dec.options().max_rows - int64_t(rows.size());
      const int64_t k = std::min({take, room, n - fed});
      for (int64_t i = 0; i < k; ++i) {
        rows.push_back({seq, texts[text][size_t(fed + i)]});
        where.emplace_back(text, fed + i);
      }
      (fed < prompt[text] ? chunked : single) |= k > 0;
      rep.longest_chunk = std::max(rep.longest_chunk, k);
    }
    const DecodeStep out = dec.step(rows);
    EXPECT_TRUE(bool(out)) << "the pool lacked " << out.blocks_short << " blocks";
    if (!out) return rep;
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto [text, pos] = where[r];
      rep.worst = std::max(rep.worst, row_rel_error(out.logits + int64_t(r) * v,
                                                    ref[text].data() + pos * v, v));
    }
    ++rep.steps;
    rep.rows += int64_t(rows.size());
    rep.widest_step = std::max(rep.widest_step, int64_t(rows.size()));
    rep.mixed_steps += chunked && single;
    for (auto it = live.begin(); it != live.end();) {
      for (int32_t b : dec.pool().table(it->first)) holders[b].insert(it->second);
      if (dec.length(it->first) == int64_t(texts[it->second].size())) {
        dec.free_sequence(it->first);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [b, texts_held] : holders) rep.reused_blocks += texts_held.size() > 1;
  return rep;
}

}  // namespace mt
