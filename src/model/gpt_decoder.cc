#include "model/gpt_decoder.h"

#include <cmath>
#include <cstring>

#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"

namespace mt {

GptDecoder::GptDecoder(const ParamRegistry& reg, const float* params)
    : sh_(make_shapes(reg, 1)), w_(bind_weights(reg, const_cast<float*>(params))) {
  MT_CHECK(reg.stage().tp_size == 1 && sh_.has_embedding && sh_.has_output,
           "the decoder needs the whole model on one rank");
  const int64_t h = sh_.h, L = sh_.num_layers;
  auto carve = [&](Arena& a) {
    k_cache_ = a.alloc_f32(L * sh_.max_pos * h);
    v_cache_ = a.alloc_f32(L * sh_.max_pos * h);
    x_ = a.alloc_f32(h);
    ln_ = a.alloc_f32(h);
    mean_ = a.alloc_f32(1);
    rstd_ = a.alloc_f32(1);
    qkv_ = a.alloc_f32(3 * h);
    ctx_ = a.alloc_f32(h);
    tmp_ = a.alloc_f32(h);
    fc_ = a.alloc_f32(sh_.f);
    logits_ = a.alloc_f32(sh_.v);
    scores_ = a.alloc_f32(sh_.max_pos);
  };
  Arena plan;
  carve(plan);
  buf_ = HostBuffer(plan.used());
  Arena real(buf_.data(), buf_.size());
  carve(real);
}

const float* GptDecoder::step(int32_t token) {
  MT_CHECK(pos_ < sh_.max_pos, "decoder context of ", sh_.max_pos, " positions is full");
  MT_CHECK(token >= 0 && token < sh_.vocab_size, "token id ", token,
           " is outside the vocabulary of ", sh_.vocab_size);
  const int64_t h = sh_.h, d = sh_.d, a = sh_.a, f = sh_.f;
  const int32_t position = int32_t(pos_);
  embedding_forward(x_, &token, w_.wte, 1, h, 0, sh_.v, false);
  embedding_forward(x_, &position, w_.wpe, 1, h, 0, sh_.max_pos, true);
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t l = 0; l < sh_.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    float* kc = k_cache_ + l * sh_.max_pos * h;
    float* vc = v_cache_ + l * sh_.max_pos * h;
    layernorm_forward(ln_, mean_, rstd_, x_, lw.ln1_w, lw.ln1_b, 1, h, sh_.eps);
    linear_forward(qkv_, ln_, lw.qkv_w, lw.qkv_b, 1, h, 3 * h);
    for (int64_t j = 0; j < a; ++j) {  // qkv rows are (a, 3, d)
      std::memcpy(kc + pos_ * h + j * d, qkv_ + j * 3 * d + d, size_t(d) * 4);
      std::memcpy(vc + pos_ * h + j * d, qkv_ + j * 3 * d + 2 * d, size_t(d) * 4);
    }
    for (int64_t j = 0; j < a; ++j) {
      const float* q = qkv_ + j * 3 * d;
      float mx = -INFINITY;
      for (int64_t t = 0; t <= pos_; ++t) {
        float dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[e] * kc[t * h + j * d + e];
        scores_[t] = dot * scale;
        mx = std::max(mx, scores_[t]);
      }
      float sum = 0;
      for (int64_t t = 0; t <= pos_; ++t) sum += (scores_[t] = std::exp(scores_[t] - mx));
      float* out = ctx_ + j * d;
      std::fill(out, out + d, 0.f);
      for (int64_t t = 0; t <= pos_; ++t) {
        const float p = scores_[t] / sum;
        for (int64_t e = 0; e < d; ++e) out[e] += p * vc[t * h + j * d + e];
      }
    }
    linear_forward(tmp_, ctx_, lw.proj_w, lw.proj_b, 1, h, h);
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
    layernorm_forward(ln_, mean_, rstd_, x_, lw.ln2_w, lw.ln2_b, 1, h, sh_.eps);
    linear_forward(fc_, ln_, lw.fc1_w, lw.fc1_b, 1, h, f);
    gelu_forward(fc_, fc_, f);
    linear_forward(tmp_, fc_, lw.fc2_w, lw.fc2_b, 1, f, h);
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
  }
  layernorm_forward(ln_, mean_, rstd_, x_, w_.lnf_w, w_.lnf_b, 1, h, sh_.eps);
  linear_forward(logits_, ln_, w_.wte, nullptr, 1, h, sh_.v);
  ++pos_;
  return logits_;
}

}  // namespace mt
