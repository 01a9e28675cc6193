// The KV-cache decoder, one token at a time, gives the logits of the full
// forward pass at every position — for GPT-2 (learned positions) and for the
// Llama configuration (RoPE at each position, a cache of query groups,
// SwiGLU, RMSNorm, untied output layer) and an MoE one — and with a cache of the positions
// asked for, not of the model's whole context.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "decoder_test_util.h"
#include "model/gpt_decoder.h"
#include "model_test_util.h"

namespace mt {
namespace gpt_decoder_test {

// positions: the decoder's cache (0: the whole context).
void expect_decoder_matches_forward(const ModelConfig& cfg, int64_t positions = 0) {
  TinyGpt m(cfg, 1);
  m.reg.initialize(m.params, 11);
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const ParamSpec& p : m.reg.params())  // generic norms and biases
    if (p.init != Init::kNormal)
      for (int64_t i = 0; i < p.numel(); ++i) m.params[p.offset + i] += nd(gen);
  const int64_t s = cfg.seq_length, v = cfg.padded_vocab_size;
  std::vector<int32_t> tokens(static_cast<size_t>(s)), labels(static_cast<size_t>(s), 0);
  for (auto& t : tokens) t = int32_t(gen() % uint32_t(cfg.vocab_size));
  PassContext eval;
  eval.training = false;
  m.loss(tokens, labels, eval, false);  // leaves the logits (s, 1, v) in the workspace
  const std::vector<float> full(m.ws.logits, m.ws.logits + s * v);

  GptDecoder dec(m.reg, m.params, TensorParallel{}, positions);
  EXPECT_EQ(dec.capacity(), positions > 0 ? positions : cfg.max_position_embeddings);
  EXPECT_EQ(dec.context(), cfg.max_position_embeddings);
  // The closed form against the carving (alignment: < 64 bytes per buffer).
  const double planned = GptDecoder::planned_bytes(m.reg, dec.capacity());
  EXPECT_LE(planned, double(dec.bytes()));
  EXPECT_LT(double(dec.bytes()), planned + 16 * 64);
  for (int64_t t = 0; t < s; ++t) {
    const float* got = dec.step(tokens[size_t(t)]);
    double worst = 0;
    for (int64_t j = 0; j < v; ++j)
      worst = std::max(worst, double(std::abs(got[j] - full[size_t(t * v + j)])));
    EXPECT_LT(worst, 2e-5) << "position " << t;
  }
  EXPECT_EQ(dec.position(), s);
  if (dec.capacity() == s) {
    EXPECT_THROW(dec.step(tokens[0]), Error);  // the cache is full
  }
}

ModelConfig base() {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 32;
  cfg.num_attention_heads = 4;
  cfg.seq_length = 10;
  cfg.vocab_size = 30;
  cfg.make_vocab_size_divisible_by = 16;
  cfg.init_method_std = 0.1f;
  return cfg;
}

TEST(GptDecoder, GptStepsEqualTheFullForward) {
  ModelConfig cfg = base();
  cfg.finalize(1);
  expect_decoder_matches_forward(cfg);
}

TEST(GptDecoder, LlamaStepsEqualTheFullForward) {
  ModelConfig cfg = llama_shape(base());
  cfg.finalize(1);
  expect_decoder_matches_forward(cfg);
}

// An MoE layer in every layer (top-2 of 4 experts, a shared expert): each
// step routes its token as the dropless training forward does.
TEST(GptDecoder, MoeStepsEqualTheFullForward) {
  ModelConfig cfg = llama_shape(base());
  cfg.num_experts = 4;
  cfg.moe_ffn_hidden_size = 20;
  cfg.moe_layer_freq = "[1,1]";
  cfg.moe_router_topk = 2;
  cfg.moe_shared_expert_intermediate_size = 16;
  cfg.finalize(1);
  expect_decoder_matches_forward(cfg);
}

// Qwen3's attention (head size 12 apart from h/a = 8, q/k RMSNorms before
// RoPE, GQA) and Qwen2's (QKV bias only), and q/k LayerNorms: each cached key
// is normalized and rotated as the training forward does it.
TEST(GptDecoder, QwenAttentionOptionsStepsEqualTheFullForward) {
  ModelConfig qwen3 = llama_shape(base());
  qwen3.kv_channels = 12;
  qwen3.qk_layernorm = true;
  qwen3.finalize(1);
  expect_decoder_matches_forward(qwen3);
  ModelConfig qwen2 = llama_shape(base());
  qwen2.add_qkv_bias = true;
  qwen2.finalize(1);
  expect_decoder_matches_forward(qwen2);
  ModelConfig gpt = base();
  gpt.qk_layernorm = true;
  gpt.kv_channels = 4;
  gpt.finalize(1);
  expect_decoder_matches_forward(gpt);
}

// Multi-latent attention: the cache holds each token's normed kv latent and
// rotated RoPE key (kv_lora_rank + qk_pos_emb_head_dim floats a layer, not
// heads x head size), and each step's up-projected keys and values give the
// training forward's logits: V2-Lite's shape (a plain q projection, plain
// RoPE) and V3's (the q latent, YaRN with mscale).
TEST(GptDecoder, MultiLatentAttentionStepsEqualTheFullForward) {
  for (int64_t q_lora_rank : {0, 12}) {
    ModelConfig cfg = with_mla(llama_shape(base()));
    cfg.q_lora_rank = q_lora_rank;
    cfg.max_position_embeddings = 16;
    cfg.rope_type = q_lora_rank > 0 ? "yarn" : "rope";
    cfg.yarn_original_max_position_embeddings = 6;
    cfg.finalize(1);
    expect_decoder_matches_forward(cfg);
    // The cache a token takes, as carved for a pool of 3 blocks of 5 rows,
    // and as the start-up line of generate says it (2 layers).
    TinyGpt m(cfg, 1);
    Arena count;
    MultiLatentAttention::carve_cache(count, m.sh, KvPoolDims{3, 5});
    EXPECT_GE(double(count.used()), 15.0 * (8 + 4) * 4);
    EXPECT_LT(double(count.used()), 15.0 * (8 + 4) * 4 + 64);  // one tensor's alignment
    EXPECT_EQ(BatchedDecoder::cache_bytes_per_token(m.reg), 2.0 * (8 + 4) * 4);
  }
}

// A sliding window (--window-size 3,0) shorter than the text: each layer's
// cache is a ring of 4 rows, and every position's logits (those past the
// window read rows the ring has overwritten) equal the full windowed forward's.
TEST(GptDecoder, WindowedRingCacheStepsEqualTheFullForward) {
  for (const char* window : {"3,0", "0,0", "(6, 0)"}) {
    ModelConfig cfg = llama_shape(base());
    cfg.window_size = window;
    cfg.finalize(1);
    expect_decoder_matches_forward(cfg);
    TinyGpt m(cfg, 1);
    GptDecoder dec(m.reg, m.params, TensorParallel{}, 0);
    EXPECT_EQ(dec.cache_rows(), cfg.window_left() + 1) << window;
    EXPECT_EQ(dec.capacity(), cfg.max_position_embeddings);
    ModelConfig full = cfg;
    full.window_size = "";
    TinyGpt mf(full, 1);
    EXPECT_LT(GptDecoder::planned_bytes(m.reg, 10), GptDecoder::planned_bytes(mf.reg, 10));
  }
  ModelConfig gpt = base();  // learned positions
  gpt.window_size = "2,0";
  gpt.finalize(1);
  expect_decoder_matches_forward(gpt);
}

// A context of 2^40 positions (RoPE: no table to train): neither training's
// RoPE table nor the decoder's cache is sized by it (281 TB: bad_alloc before).
TEST(GptDecoder, CacheHoldsThePositionsAskedForNotTheWholeContext) {
  ModelConfig cfg = llama_shape(base());
  cfg.max_position_embeddings = int64_t(1) << 40;
  cfg.finalize(1);
  expect_decoder_matches_forward(cfg, cfg.seq_length);
  TinyGpt m(cfg, 1);
  GptDecoder dec(m.reg, m.params, TensorParallel{}, 3);
  for (int32_t t = 0; t < 3; ++t) dec.step(t);
  EXPECT_THROW(dec.step(0), Error);  // 3 positions, full
  dec.reset();
  EXPECT_NO_THROW(dec.step(0));
  EXPECT_THROW(GptDecoder(m.reg, m.params, TensorParallel{}, cfg.max_position_embeddings + 1),
               Error);
  // The whole context, planned: 2 x 2 layers x 2^40 x 16 floats of cache alone.
  EXPECT_GT(GptDecoder::planned_bytes(m.reg, cfg.max_position_embeddings), 2.8e14);
}

}  // namespace gpt_decoder_test
}  // namespace mt
