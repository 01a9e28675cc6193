#include "model/gpt_decoder.h"

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
}  // namespace

GptDecoder::GptDecoder(const ParamRegistry& reg, const float* params, const TensorParallel& tp,
                       int64_t positions, const Communicator* ep)
    : sh_(make_shapes(reg, 1, TensorParallel{tp.tp, false}, 0, ContextParallel{},
                      cache_positions(reg, positions), ep)),
      w_(bind_weights(reg, params)),
      capacity_(cache_positions(reg, positions)) {
  MT_CHECK(sh_.has_embedding && sh_.has_output,
           "the decoder needs every layer on each rank (no pipeline parallelism)");
  const int64_t h = sh_.h, L = sh_.num_layers;
  const std::vector<LayerSpec>& specs = sh_.layer_specs;
  auto carve = [&](Arena& a) {
    caches_.assign(size_t(L), AttentionCache{});
    for (int64_t l = 0; l < L; ++l)
      with_kind<AttentionKinds>(sh_.spec(l).attention, [&](auto k) {
        caches_[size_t(l)].emplace<k.index>(decltype(k)::type::carve_cache(a, sh_, capacity_));
      });
    x_ = a.alloc_f32(h);
    ln_ = a.alloc_f32(h);
    mean_ = a.alloc_f32(1);
    rstd_ = a.alloc_f32(1);
    tmp_ = a.alloc_f32(h);
    for_each_kind<AttentionKinds>([&](auto k) {
      if (specs_take(specs, &LayerSpec::attention, k.index))
        std::get<k.index>(attn_ws_) = decltype(k)::type::carve_decode_workspace(a, sh_, capacity_);
    });
    for_each_kind<MlpKinds>([&](auto k) {
      if (specs_take(specs, &LayerSpec::mlp, k.index))
        std::get<k.index>(mlp_ws_) = decltype(k)::type::carve_decode_workspace(a, sh_, capacity_);
    });
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
  const int64_t tp_size = reg.stage().tp_size;
  const double tp = double(tp_size), p = double(positions);
  const double h = double(c.hidden_size), v = double(c.padded_vocab_size) / tp;
  double cache = 0;  // each layer's, of its attention kind
  for (int64_t l = 0; l < c.num_layers; ++l)
    with_kind<AttentionKinds>(layer_spec(c, l).attention, [&](auto k) {
      cache += decltype(k)::type::cache_floats(c, tp_size, p);
    });
  // x, ln, tmp; mean, rstd; local and gathered logits; the scratch of each
  // block kind the layers take
  double scratch = 3 * h + 2 + v + v * tp;
  for_each_kind<AttentionKinds>([&](auto k) {
    if (model_uses_attention(c, k.index))
      scratch += decltype(k)::type::decode_workspace_floats(c, tp_size, p);
  });
  for_each_kind<MlpKinds>([&](auto k) {
    if (model_uses_mlp(c, k.index))
      scratch += decltype(k)::type::decode_workspace_floats(c, tp_size, p);
  });
  const double rope =  // cos and sin: (positions, rot_dim / 2) each
      c.rope() ? p * double(make_rope_table(1, c.head_dim(), c.rotary_percent, c.rotary_base).rot_dim)
               : 0;
  return 4 * (cache + scratch + rope);
}

int64_t GptDecoder::cache_rows() const {
  return caches_.empty() ? 0 : std::visit([](const auto& c) { return c.capacity; }, caches_[0]);
}

int64_t GptDecoder::bytes() const {
  const size_t rope = sh_.rope ? (sh_.rope->cos.size() + sh_.rope->sin.size()) * sizeof(float) : 0;
  return carved_ + int64_t(rope);
}

const float* GptDecoder::step(int32_t token) {
  MT_CHECK(pos_ < capacity_, "the decoder's cache of ", capacity_, " positions is full");
  MT_CHECK(token >= 0 && token < sh_.vocab_size, "token id ", token,
           " is outside the vocabulary of ", sh_.vocab_size);
  const int64_t h = sh_.h;
  const Communicator* tp = sh_.tp.size() > 1 ? sh_.tp.tp : nullptr;
  const int32_t position = int32_t(pos_);
  vocab_parallel_embedding_forward(x_, nullptr, &token, w_.wte, 1, h, sh_.v_start, sh_.v, sh_.tp);
  if (sh_.learned_positions) embedding_forward(x_, &position, w_.wpe, 1, h, 0, sh_.max_pos, true);
  for (int64_t l = 0; l < sh_.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln1.w, lw.ln1.b, 1);
    with_kind<AttentionKinds>(lw.spec.attention, [&](auto k) {
      decltype(k)::type::decode(tmp_, std::get<k.index>(caches_[size_t(l)]),
                                std::get<k.index>(attn_ws_), ln_, std::get<k.index>(lw.attention),
                                sh_, pos_);
    });
    for (int64_t i = 0; i < h; ++i) x_[i] += tmp_[i];
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln2.w, lw.ln2.b, 1);
    with_kind<MlpKinds>(lw.spec.mlp, [&](auto k) {
      decltype(k)::type::decode(tmp_, std::get<k.index>(mlp_ws_), ln_, std::get<k.index>(lw.mlp),
                                sh_);
    });
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
