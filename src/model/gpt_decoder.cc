#include "model/gpt_decoder.h"

#include <cmath>
#include <cstring>

#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "parallel/vocab_parallel_embedding.h"

namespace mt {

namespace {
int64_t cache_positions(const ParamRegistry& reg, int64_t positions) {
  const int64_t context = reg.config().max_position_embeddings;
  MT_CHECK(positions >= 0 && positions <= context, "a decoder cache of ", positions,
           " positions; it holds 1 to ", context, " (the model's context), 0 for all");
  return positions == 0 ? context : positions;
}
}  // namespace

GptDecoder::GptDecoder(const ParamRegistry& reg, const float* params, const TensorParallel& tp,
                       int64_t positions)
    : sh_(make_shapes(reg, 1, TensorParallel{tp.tp, false}, 0, ContextParallel{},
                      cache_positions(reg, positions))),
      w_(bind_weights(reg, params)),
      capacity_(cache_positions(reg, positions)) {
  MT_CHECK(sh_.has_embedding && sh_.has_output,
           "the decoder needs every layer on each rank (no pipeline parallelism)");
  const int64_t h = sh_.h, hl = sh_.a * sh_.d, kvl = sh_.g * sh_.d, L = sh_.num_layers;
  auto carve = [&](Arena& a) {
    k_cache_ = a.alloc_f32(L * capacity_ * kvl);  // one key/value head per query group
    v_cache_ = a.alloc_f32(L * capacity_ * kvl);
    x_ = a.alloc_f32(h);
    ln_ = a.alloc_f32(h);
    mean_ = a.alloc_f32(1);
    rstd_ = a.alloc_f32(1);
    qkv_ = a.alloc_f32(hl + 2 * kvl);
    q_ = a.alloc_f32(hl);
    ctx_ = a.alloc_f32(hl);
    tmp_ = a.alloc_f32(h);
    fc_ = a.alloc_f32(sh_.f_in);
    act_ = a.alloc_f32(sh_.f);
    logits_local_ = a.alloc_f32(sh_.v);
    logits_ = a.alloc_f32(sh_.v * sh_.tp.size());
    scores_ = a.alloc_f32(capacity_);
  };
  Arena plan;
  carve(plan);
  carved_ = int64_t(plan.used());
  buf_ = HostBuffer(plan.used());
  Arena real(buf_.data(), buf_.size());
  carve(real);
}

double GptDecoder::planned_bytes(const ParamRegistry& reg, int64_t positions) {
  const ModelConfig& c = reg.config();
  const double tp = double(reg.stage().tp_size), p = double(positions);
  const double d = double(c.head_dim()), h = double(c.hidden_size);
  const double hl = double(c.num_attention_heads) / tp * d, kvl = double(c.query_groups()) / tp * d;
  const double f = double(c.ffn_hidden_size) / tp, f_in = c.swiglu ? 2 * f : f;
  const double v = double(c.padded_vocab_size) / tp;
  const double cache = 2 * double(c.num_layers) * p * kvl;  // keys and values
  // x, ln, tmp; mean, rstd; qkv; q, ctx; fc; act; local and gathered logits; scores
  const double scratch = 3 * h + 2 + (hl + 2 * kvl) + 2 * hl + f_in + f + v + v * tp + p;
  const double rope =  // cos and sin: (positions, rot_dim / 2) each
      c.rope() ? p * double(make_rope_table(1, c.head_dim(), c.rotary_percent, c.rotary_base).rot_dim)
               : 0;
  return 4 * (cache + scratch + rope);
}

int64_t GptDecoder::bytes() const {
  const size_t rope = sh_.rope ? (sh_.rope->cos.size() + sh_.rope->sin.size()) * sizeof(float) : 0;
  return carved_ + int64_t(rope);
}

const float* GptDecoder::step(int32_t token) {
  MT_CHECK(pos_ < capacity_, "the decoder's cache of ", capacity_, " positions is full");
  MT_CHECK(token >= 0 && token < sh_.vocab_size, "token id ", token,
           " is outside the vocabulary of ", sh_.vocab_size);
  const int64_t h = sh_.h, d = sh_.d, a = sh_.a, g = sh_.g, hl = a * d, kvl = g * d;
  const int64_t hpg = a / g, f = sh_.f;
  const Communicator* tp = sh_.tp.size() > 1 ? sh_.tp.tp : nullptr;
  const int32_t position = int32_t(pos_);
  vocab_parallel_embedding_forward(x_, nullptr, &token, w_.wte, 1, h, sh_.v_start, sh_.v, sh_.tp);
  if (sh_.learned_positions) embedding_forward(x_, &position, w_.wpe, 1, h, 0, sh_.max_pos, true);
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t l = 0; l < sh_.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    float* kc = k_cache_ + l * capacity_ * kvl;
    float* vc = v_cache_ + l * capacity_ * kvl;
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln1_w, lw.ln1_b, 1);
    linear_forward(qkv_, ln_, lw.qkv_w, lw.qkv_b, 1, h, hl + 2 * kvl);  // column-parallel
    for (int64_t gi = 0; gi < g; ++gi) {  // qkv rows are (g_local, a/g + 2, d)
      const float* grp = qkv_ + gi * (hpg + 2) * d;
      std::memcpy(q_ + gi * hpg * d, grp, size_t(hpg * d) * 4);
      std::memcpy(kc + pos_ * kvl + gi * d, grp + hpg * d, size_t(d) * 4);
      std::memcpy(vc + pos_ * kvl + gi * d, grp + (hpg + 1) * d, size_t(d) * 4);
    }
    if (sh_.rope) {  // this position's rotation of q and of the new key
      rope_forward(q_, 1, a, 1, d, *sh_.rope, pos_);
      rope_forward(kc + pos_ * kvl, 1, g, 1, d, *sh_.rope, pos_);
    }
    for (int64_t j = 0; j < a; ++j) {
      const float* q = q_ + j * d;
      const int64_t kv = (j / hpg) * d;  // the head's group
      float mx = -INFINITY;
      for (int64_t t = 0; t <= pos_; ++t) {
        float dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[e] * kc[t * kvl + kv + e];
        scores_[t] = dot * scale;
        mx = std::max(mx, scores_[t]);
      }
      float sum = 0;
      for (int64_t t = 0; t <= pos_; ++t) sum += (scores_[t] = std::exp(scores_[t] - mx));
      float* out = ctx_ + j * d;
      std::fill(out, out + d, 0.f);
      for (int64_t t = 0; t <= pos_; ++t) {
        const float p = scores_[t] / sum;
        for (int64_t e = 0; e < d; ++e) out[e] += p * vc[t * kvl + kv + e];
      }
    }
    row_parallel_linear_forward(tmp_, tmp_, ctx_, lw.proj_w, lw.proj_b, 1, hl, h, sh_.tp);
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln2_w, lw.ln2_b, 1);
    linear_forward(fc_, ln_, lw.fc1_w, lw.fc1_b, 1, h, sh_.f_in);  // column-parallel
    mlp_activation_forward(sh_, act_, fc_, 1);
    row_parallel_linear_forward(tmp_, tmp_, act_, lw.fc2_w, lw.fc2_b, 1, f, h, sh_.tp);
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
  }
  norm_forward(sh_, ln_, mean_, rstd_, x_, w_.lnf_w, w_.lnf_b, 1);
  linear_forward(logits_local_, ln_, w_.out, nullptr, 1, h, sh_.v);
  if (tp)  // gather the vocabulary shards: every rank samples the same token
    tp->all_gather(logits_, logits_local_, sh_.v);
  else
    std::memcpy(logits_, logits_local_, size_t(sh_.v) * 4);
  ++pos_;
  return logits_;
}

}  // namespace mt
