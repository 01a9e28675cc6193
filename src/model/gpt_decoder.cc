#include "model/gpt_decoder.h"

#include <algorithm>
#include <cstring>

#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "parallel/vocab_parallel_embedding.h"

namespace mt {

namespace {
int64_t cache_positions(const ParamRegistry& reg, int64_t positions) {
  const int64_t context = reg.config().max_position_embeddings;
  MT_CHECK(positions >= 0 && positions <= context, "a decoder cache of ", positions,
           " positions; it holds 1 to ", context, " (the model's context), 0 for all");
  return positions == 0 ? context : positions;
}
// Rows of each layer's key/value cache: the positions, or with a sliding
// window of L keys a ring of the L + 1 positions a query sees.
int64_t cache_rows_for(const ModelConfig& c, int64_t positions) {
  return c.window_left() >= 0 ? std::min(positions, c.window_left() + 1) : positions;
}
}  // namespace

GptDecoder::GptDecoder(const ParamRegistry& reg, const float* params, const TensorParallel& tp,
                       int64_t positions, const Communicator* ep)
    : sh_(make_shapes(reg, 1, TensorParallel{tp.tp, false}, 0, ContextParallel{},
                      cache_positions(reg, positions), ep)),
      w_(bind_weights(reg, params)),
      capacity_(cache_positions(reg, positions)),
      cache_rows_(cache_rows_for(reg.config(), capacity_)) {
  MT_CHECK(sh_.has_embedding && sh_.has_output,
           "the decoder needs every layer on each rank (no pipeline parallelism)");
  const int64_t h = sh_.h, kvl = sh_.g * sh_.d, L = sh_.num_layers;
  auto carve = [&](Arena& a) {
    k_cache_ = a.alloc_f32(L * cache_rows_ * kvl);  // one key/value head per query group
    v_cache_ = a.alloc_f32(L * cache_rows_ * kvl);
    x_ = a.alloc_f32(h);
    ln_ = a.alloc_f32(h);
    mean_ = a.alloc_f32(1);
    rstd_ = a.alloc_f32(1);
    tmp_ = a.alloc_f32(h);
    attn_ws_ = carve_attention_decode_workspace(a, sh_, cache_rows_);
    mlp_ws_ = carve_mlp_decode_workspace(a, sh_);
    if (sh_.moe.experts > 0) moe_ws_ = carve_moe_decode_workspace(a, sh_);
    logits_local_ = a.alloc_f32(sh_.v);
    logits_ = a.alloc_f32(sh_.v * sh_.tp.size());
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
  const double kvl = double(c.query_groups()) / tp * d;
  const double f = double(c.ffn_hidden_size) / tp, f_in = c.swiglu ? 2 * f : f;
  const double v = double(c.padded_vocab_size) / tp;
  const double rows = double(cache_rows_for(c, positions));
  const double cache = 2 * double(c.num_layers) * rows * kvl;  // keys and values
  // x, ln, tmp; mean, rstd; the blocks' scratch; local and gathered logits
  const double scratch = 3 * h + 2 + attention_decode_workspace_floats(c, reg.stage().tp_size, rows) +
                         mlp_decode_workspace_floats(f, f_in) + v + v * tp +
                         (c.moe() ? moe_decode_workspace_floats(c, reg.stage().tp_size) : 0.0);
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
  const int64_t h = sh_.h, kvl = sh_.g * sh_.d;
  const Communicator* tp = sh_.tp.size() > 1 ? sh_.tp.tp : nullptr;
  const int32_t position = int32_t(pos_);
  vocab_parallel_embedding_forward(x_, nullptr, &token, w_.wte, 1, h, sh_.v_start, sh_.v, sh_.tp);
  if (sh_.learned_positions) embedding_forward(x_, &position, w_.wpe, 1, h, 0, sh_.max_pos, true);
  for (int64_t l = 0; l < sh_.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    const KvCache cache{k_cache_ + l * cache_rows_ * kvl, v_cache_ + l * cache_rows_ * kvl,
                        cache_rows_};
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln1.w, lw.ln1.b, 1);
    attention_block_decode(tmp_, cache, attn_ws_, ln_, lw.attention, sh_, pos_);
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln2.w, lw.ln2.b, 1);
    switch (lw.spec.mlp) {
      case MlpKind::kDense: mlp_block_decode(tmp_, mlp_ws_, ln_, lw.mlp, sh_); break;
      case MlpKind::kMoe: moe_block_decode(tmp_, moe_ws_, ln_, lw.moe, sh_); break;
    }
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
  }
  norm_forward(sh_, ln_, mean_, rstd_, x_, w_.lnf.w, w_.lnf.b, 1);
  linear_forward(logits_local_, ln_, w_.out, nullptr, 1, h, sh_.v);
  if (tp)  // gather the vocabulary shards: every rank samples the same token
    tp->all_gather(logits_, logits_local_, sh_.v);
  else
    copy_bytes(logits_, logits_local_, size_t(sh_.v) * 4);
  ++pos_;
  return logits_;
}

}  // namespace mt
