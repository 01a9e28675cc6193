// Documents inside a sequence (Megatron's --reset-position-ids,
// --reset-attention-mask, --eod-mask-loss) through the whole model: a sample
// packing two documents gives each document's token losses and gradient as
// if it were trained alone, with RoPE and with learned positions; and the
// loss mask's normalization per micro-batch (Megatron's default) and per
// token (--calculate-per-token-loss) on a hand example whose micro-batches
// count different tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "model_test_util.h"

namespace mt {
namespace documents_test {

// mla: RoPE's configuration with multi-latent attention (its RoPE features
// rotated at each token's own position too).
ModelConfig doc_config(bool rope, int64_t seq, bool mla = false) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 16;
  cfg.num_attention_heads = 4;
  cfg.seq_length = seq;
  cfg.max_position_embeddings = 16;  // the same weights at every length
  cfg.vocab_size = 20;
  cfg.make_vocab_size_divisible_by = 8;
  cfg.init_method_std = 0.2f;
  cfg.hidden_dropout = 0.f;  // dropout masks are keyed by position: packed != apart
  cfg.attention_dropout = 0.f;
  if (rope) {
    cfg.normalization = "RMSNorm";
    cfg.position_embedding_type = "rope";
    cfg.swiglu = true;
    cfg.ffn_hidden_size = 24;
    cfg.disable_bias_linear = true;
  }
  if (mla) {
    cfg.multi_latent_attention = true;
    cfg.q_lora_rank = 6;
    cfg.kv_lora_rank = 5;
    cfg.qk_head_dim = 4;
    cfg.qk_pos_emb_head_dim = 4;
    cfg.v_head_dim = 3;
    cfg.qk_layernorm = true;
  }
  cfg.finalize(1);
  return cfg;
}

// Forward (and backward, gradients into m.grads from zero) of one micro-batch
// with grad_scale 1 and per-token rows: the gradient of its counted losses'
// sum. Returns the per-token losses (s, b).
std::vector<float> losses_and_grads(TinyGpt& m, const MicroBatchInput& mb) {
  PassContext ctx;
  ctx.per_token_loss = true;
  ctx.grad_scale = 1.f;
  m.zero_grads();
  gpt_forward(m.rt.w(), &m.rt.chunks[0].g, m.rt.slots()[0].act, m.rt.ws, m.sh, mb, ctx);
  gpt_backward(m.rt.w(), m.rt.g(), m.rt.slots()[0].act, m.rt.ws, m.sh, ctx);
  return m.rt.slots()[0].act.host_losses;
}

MicroBatchInput plain(const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels) {
  MicroBatchInput mb;
  mb.tokens = tokens;
  mb.labels = labels;
  mb.loss_tokens = int64_t(tokens.size());
  return mb;
}

TEST(Documents, PackedSampleEqualsEachDocumentAlone) {
  constexpr int32_t E = 19;  // end of document
  const std::vector<int32_t> a = {3, 7, 1, 12}, b_doc = {5, 5, 9, 2, 14, 8, 4};
  const int32_t after = 6;  // the token after the sample (its last label)
  for (const int kind : {0, 1, 2}) {
    const bool rope = kind != 1, mla = kind == 2;
    SCOPED_TRACE(mla ? "MLA" : rope ? "RoPE" : "learned positions");
    TinyGpt packed(doc_config(rope, 12, mla), 1), alone_a(doc_config(rope, 4, mla), 1),
        alone_b(doc_config(rope, 7, mla), 1);
    packed.reg.initialize(packed.params, 42);
    ASSERT_EQ(packed.reg.total_floats(), alone_a.reg.total_floats());
    std::copy_n(packed.params, packed.reg.total_floats(), alone_a.params);
    std::copy_n(packed.params, packed.reg.total_floats(), alone_b.params);
    // "a0 a1 a2 a3 E b0 .. b6": as Megatron's dataset marks it, by hand.
    MicroBatchInput mb = plain({3, 7, 1, 12, E, 5, 5, 9, 2, 14, 8, 4},
                               {7, 1, 12, E, 5, 5, 9, 2, 14, 8, 4, after});
    mb.positions = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6};
    mb.doc_start = {0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5, 5};
    mb.loss_mask = {1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1};  // the E input predicts no loss
    mb.loss_tokens = 11;
    const std::vector<float> lp = losses_and_grads(packed, mb);
    const std::vector<float> la = losses_and_grads(alone_a, plain(a, {7, 1, 12, E}));
    const std::vector<float> lb = losses_and_grads(alone_b, plain(b_doc, {5, 9, 2, 14, 8, 4, after}));
    for (int64_t t = 0; t < 4; ++t)
      EXPECT_NEAR(lp[size_t(t)], la[size_t(t)], 1e-5 * std::abs(la[size_t(t)])) << "token " << t;
    for (int64_t t = 0; t < 7; ++t)
      EXPECT_NEAR(lp[size_t(5 + t)], lb[size_t(t)], 1e-5 * std::abs(lb[size_t(t)]))
          << "token " << 5 + t;
    // The gradient of the packed sample's counted losses is the two documents' sum.
    for (const ParamSpec& p : packed.reg.params()) {
      double num = 0, den = 0;
      for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) {
        const double want = double(alone_a.grads[i]) + alone_b.grads[i];
        num += (packed.grads[i] - want) * (packed.grads[i] - want);
        den += want * want;
      }
      EXPECT_LE(std::sqrt(num), 1e-5 * std::sqrt(den) + 1e-9) << p.name;
    }
    // Without the document flags the second document sees the first: other losses.
    const std::vector<float> mixed = losses_and_grads(packed, plain(mb.tokens, mb.labels));
    EXPECT_GT(std::abs(mixed[6] - lb[1]), 1e-4);
  }
}

// Two micro-batches counting 9 and 11 tokens: Megatron's default gradient is
// the mean of each micro-batch's own mean, (∇S1/9 + ∇S2/11) / 2; per token it
// is (∇S1 + ∇S2) / 20.
TEST(Documents, LossMaskNormalizesPerMicroBatchOrPerToken) {
  constexpr int32_t E = 19;
  TinyGpt m(doc_config(true, 12), 1);
  m.reg.initialize(m.params, 7);
  std::vector<MicroBatchInput> mbs = {
      plain({1, E, 2, 3, E, 4, 5, E, 6, 7, 8, 9}, {E, 2, 3, E, 4, 5, E, 6, 7, 8, 9, 10}),
      plain({1, 2, 3, 4, 5, E, 6, 7, 8, 9, 10, 11}, {2, 3, 4, 5, E, 6, 7, 8, 9, 10, 11, 12})};
  std::vector<std::vector<float>> g(2);
  std::vector<int64_t> counted;
  for (size_t k = 0; k < 2; ++k) {
    mbs[k].loss_mask.resize(12);
    for (size_t t = 0; t < 12; ++t) mbs[k].loss_mask[t] = mbs[k].tokens[t] == E ? 0.f : 1.f;
    mbs[k].loss_tokens = int64_t(std::count(mbs[k].loss_mask.begin(), mbs[k].loss_mask.end(), 1.f));
    counted.push_back(mbs[k].loss_tokens);
    losses_and_grads(m, mbs[k]);
    g[k].assign(m.grads, m.grads + m.reg.total_floats());
  }
  ASSERT_EQ(counted, (std::vector<int64_t>{9, 11}));
  for (const bool per_token : {false, true}) {
    SCOPED_TRACE(per_token ? "per token" : "per micro-batch");
    PassContext ctx;  // as train_step sets it (one rank, two micro-batches)
    ctx.per_token_loss = per_token;
    ctx.grad_scale = per_token ? 1.f / 20.f : 1.f / float(12 * 2);
    m.zero_grads();
    for (MicroBatchInput& mb : mbs) {
      gpt_forward(m.rt.w(), &m.rt.chunks[0].g, m.rt.slots()[0].act, m.rt.ws, m.sh, mb, ctx);
      gpt_backward(m.rt.w(), m.rt.g(), m.rt.slots()[0].act, m.rt.ws, m.sh, ctx);
    }
    double num = 0, den = 0, differs = 0;
    for (int64_t i = 0; i < m.reg.total_floats(); ++i) {
      const double megatron = per_token ? (double(g[0][size_t(i)]) + g[1][size_t(i)]) / 20.0
                                        : (g[0][size_t(i)] / 9.0 + g[1][size_t(i)] / 11.0) / 2.0;
      const double other = per_token ? (g[0][size_t(i)] / 9.0 + g[1][size_t(i)] / 11.0) / 2.0
                                     : (double(g[0][size_t(i)]) + g[1][size_t(i)]) / 20.0;
      num += (m.grads[i] - megatron) * (m.grads[i] - megatron);
      den += megatron * megatron;
      differs += (megatron - other) * (megatron - other);
    }
    EXPECT_LE(std::sqrt(num), 1e-6 * std::sqrt(den));
    EXPECT_GT(std::sqrt(differs), 1e-3 * std::sqrt(den)) << "the two normalizations coincide";
  }
}

}  // namespace documents_test
}  // namespace mt
