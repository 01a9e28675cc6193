#include "model/batched_decoder.h"

#include <algorithm>

#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "parallel/vocab_parallel_embedding.h"

namespace mt {

namespace {
// The options with their defaults filled in and checked, and what follows
// from them: the pool's blocks, a sequence's ring of slots, the keys one
// query reads at most.
struct Sizes {
  BatchedDecoderOptions opt;
  int64_t blocks = 0, ring = 0, span = 0;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Sizes resolve(const ModelConfig& c, const BatchedDecoderOptions& o) {
  MT_CHECK(o.block_size >= 1, "a key/value block of ", o.block_size,
           " positions; fix: a block size >= 1 (16 is usual)");
  MT_CHECK(o.tokens >= 1, "a key/value pool of ", o.tokens,
           " tokens; fix: a token budget >= 1 (the positions all live sequences hold)");
  MT_CHECK(o.max_sequences >= 1, "a decoder of ", o.max_sequences,
           " sequences at most; fix: max_sequences >= 1");
  MT_CHECK(o.max_rows >= 1, "a decoder of ", o.max_rows, " rows per step; fix: max_rows >= 1");
  Sizes z;
  z.opt = o;
  z.blocks = ceil_div(o.tokens, o.block_size);
  const int64_t context = c.max_position_embeddings, window = c.window_left();
  if (z.opt.max_positions == 0)  // a windowed sequence outruns the pool in its ring
    z.opt.max_positions = window >= 0 ? context : std::min(context, z.blocks * o.block_size);
  MT_CHECK(z.opt.max_positions >= 1 && z.opt.max_positions <= context, "a sequence of ",
           z.opt.max_positions, " positions at most; the model's context holds 1 to ", context,
           "; fix: max_positions in that range (0: the pool's tokens)");
  z.span = window >= 0 ? std::min(z.opt.max_positions, window + 1) : z.opt.max_positions;
  z.ring = ceil_div(z.span, o.block_size) * o.block_size;
  return z;
}
}  // namespace

BatchedDecoder::BatchedDecoder(const ParamRegistry& reg, const float* params,
                               const BatchedDecoderOptions& opt, const TensorParallel& tp,
                               const Communicator* ep)
    : opt_(resolve(reg.config(), opt).opt),
      sh_(make_shapes(reg, 1, TensorParallel{tp.tp, false}, 0, ContextParallel{},
                      opt_.max_positions, ep)),
      w_(bind_weights(reg, params)),
      pool_(resolve(reg.config(), opt).blocks, opt_.block_size, opt_.max_sequences,
            resolve(reg.config(), opt).ring) {
  MT_CHECK(sh_.has_embedding && sh_.has_output,
           "the decoder needs every layer on each rank (no pipeline parallelism)");
  const Sizes z = resolve(reg.config(), opt);
  const int64_t h = sh_.h, L = sh_.num_layers, R = opt_.max_rows;
  const DecodeDims dims{R, z.span};
  const std::vector<LayerSpec>& specs = sh_.layer_specs;
  const bool tp_split = sh_.tp.size() > 1;
  auto carve = [&](Arena& a) {
    caches_.assign(size_t(L), AttentionCache{});
    for (int64_t l = 0; l < L; ++l)
      with_kind<AttentionKinds>(sh_.spec(l).attention, [&](auto k) {
        caches_[size_t(l)].emplace<k.index>(
            decltype(k)::type::carve_cache(a, sh_, KvPoolDims{z.blocks, opt_.block_size}));
      });
    x_ = a.alloc_f32(R * h);
    ln_ = a.alloc_f32(R * h);
    mean_ = a.alloc_f32(R);
    rstd_ = a.alloc_f32(R);
    tmp_ = a.alloc_f32(R * h);
    for_each_kind<AttentionKinds>([&](auto k) {
      if (specs_take(specs, &LayerSpec::attention, k.index))
        std::get<k.index>(attn_ws_) = decltype(k)::type::carve_decode_workspace(a, sh_, dims);
    });
    for_each_kind<MlpKinds>([&](auto k) {
      if (specs_take(specs, &LayerSpec::mlp, k.index))
        std::get<k.index>(mlp_ws_) = decltype(k)::type::carve_decode_workspace(a, sh_, dims);
    });
    logits_local_ = a.alloc_f32(R * sh_.v);
    gathered_ = tp_split ? a.alloc_f32(R * vocab_rows()) : nullptr;
    logits_ = tp_split ? a.alloc_f32(R * vocab_rows()) : logits_local_;
  };
  Arena plan;
  carve(plan);
  carved_ = int64_t(plan.used());
  buf_ = HostBuffer(plan.used());
  Arena real(buf_.data(), buf_.size());
  carve(real);
  ids_.resize(size_t(R));
  positions_.resize(size_t(R));
  rows_.resize(size_t(R));
}

double BatchedDecoder::planned_bytes(const ParamRegistry& reg, const BatchedDecoderOptions& opt) {
  const ModelConfig& c = reg.config();
  const Sizes z = resolve(c, opt);
  const int64_t tp_size = reg.stage().tp_size;
  const DecodeDims dims{z.opt.max_rows, z.span};
  const double tp = double(tp_size), r = double(z.opt.max_rows);
  const double h = double(c.hidden_size), vocab = double(c.padded_vocab_size);
  double cache = 0;  // each layer's pool, of its attention kind
  for (int64_t l = 0; l < c.num_layers; ++l)
    with_kind<AttentionKinds>(layer_spec(c, l).attention, [&](auto k) {
      cache += decltype(k)::type::cache_floats(c, tp_size, double(z.blocks * z.opt.block_size));
    });
  // x, ln, tmp; mean, rstd; local logits (and with TP the gathered ones and
  // their rows); the scratch of each block kind the layers take
  double scratch = r * (3 * h + 2 + vocab / tp) + (tp_size > 1 ? 2 * r * vocab : 0.0);
  for_each_kind<AttentionKinds>([&](auto k) {
    if (model_uses_attention(c, k.index))
      scratch += decltype(k)::type::decode_workspace_floats(c, tp_size, dims);
  });
  for_each_kind<MlpKinds>([&](auto k) {
    if (model_uses_mlp(c, k.index))
      scratch += decltype(k)::type::decode_workspace_floats(c, tp_size, dims);
  });
  const double rope =  // cos and sin: (max_positions, rot_dim / 2) each
      c.rope() && !c.multi_latent_attention ? double(z.opt.max_positions) *
                     double(make_rope_table(1, c.head_dim(), c.rotary_percent, c.rotary_base).rot_dim)
               : 0;
  return 4 * (cache + scratch + rope);
}

double BatchedDecoder::cache_bytes_per_token(const ParamRegistry& reg) {
  const ModelConfig& c = reg.config();
  double floats = 0;
  for (int64_t l = 0; l < c.num_layers; ++l)
    with_kind<AttentionKinds>(layer_spec(c, l).attention, [&](auto k) {
      floats += decltype(k)::type::cache_floats(c, reg.stage().tp_size, 1);
    });
  return 4 * floats;
}

int64_t BatchedDecoder::bytes() const {
  const size_t rope = sh_.rope ? (sh_.rope->cos.size() + sh_.rope->sin.size()) * sizeof(float) : 0;
  return carved_ + int64_t(rope);
}

std::optional<int64_t> BatchedDecoder::add_sequence(int64_t reserve) {
  MT_CHECK(reserve >= 0 && reserve <= opt_.max_positions, "reserving ", reserve,
           " positions for a sequence; it holds 0 to ", opt_.max_positions, " (max_positions)");
  std::optional<int64_t> seq = pool_.add();
  if (seq && !pool_.hold(*seq, reserve)) {
    pool_.free(*seq);
    return std::nullopt;
  }
  return seq;
}

void BatchedDecoder::free_sequence(int64_t seq) { pool_.free(seq); }

DecodeStep BatchedDecoder::step(std::span<const DecodeToken> in) {
  const int64_t n = int64_t(in.size());
  MT_CHECK(n >= 1 && n <= opt_.max_rows, "a decoding step of ", n, " rows; this decoder takes 1 to ",
           opt_.max_rows, "; fix: split the rows over steps, or a larger max_rows");
  // Each row takes its sequence's next position.
  for (int64_t i = 0; i < n; ++i) {
    const DecodeToken& t = in[size_t(i)];
    MT_CHECK(t.token >= 0 && t.token < sh_.vocab_size, "token id ", t.token,
             " is outside the vocabulary of ", sh_.vocab_size);
    const int64_t fed = pool_.length(t.seq);  // throws for a sequence not live
    int64_t pos = fed;
    for (int64_t j = 0; j < i; ++j) pos += in[size_t(j)].seq == t.seq;
    MT_CHECK(pos < opt_.max_positions, "sequence ", t.seq, " is full: ", opt_.max_positions,
             " positions (the decoder's max_positions); fix: free it, or a decoder of more");
    // A windowed sequence's ring: rows of one step must not overwrite the keys
    // its earlier rows read (once the ring has wrapped).
    const int64_t ring = pool_.ring(), window = sh_.window_left, rows_here = pos - fed + 1;
    MT_CHECK(window < 0 || pos < ring || rows_here <= ring - window, "a step feeds sequence ",
             t.seq, " ", rows_here, " rows; its sliding window of ", window,
             " keys in a ring of ", ring, " slots takes at most ", ring - window,
             " per step; fix: feed it in smaller chunks");
    positions_[size_t(i)] = int32_t(pos);
    ids_[size_t(i)] = t.token;
  }
  // A sequence's rows need its last position's blocks: counted once, at its last row.
  int64_t more = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool last = true;
    for (int64_t j = i + 1; j < n && last; ++j) last = in[size_t(j)].seq != in[size_t(i)].seq;
    if (last) more += pool_.blocks_to_hold(in[size_t(i)].seq, positions_[size_t(i)] + 1);
  }
  if (more > pool_.free_blocks()) return DecodeStep{nullptr, more - pool_.free_blocks()};
  for (int64_t i = 0; i < n; ++i) {
    const DecodeToken& t = in[size_t(i)];
    const int64_t pos = positions_[size_t(i)];
    pool_.hold(t.seq, pos + 1);  // rows in order: a sequence's last row holds its last
    rows_[size_t(i)] = DecodeRow{pos, nullptr, pool_.ring()};
  }
  for (int64_t i = 0; i < n; ++i) {  // tables are final (and reserved: they stay put)
    rows_[size_t(i)].table = pool_.table(in[size_t(i)].seq).data();
    pool_.set_length(in[size_t(i)].seq, positions_[size_t(i)] + 1);
  }
  forward(std::span<const DecodeRow>(rows_.data(), size_t(n)));
  return DecodeStep{logits_, 0};
}

void BatchedDecoder::forward(std::span<const DecodeRow> rows) {
  const int64_t n = int64_t(rows.size()), h = sh_.h;
  vocab_parallel_embedding_forward(x_, nullptr, ids_.data(), w_.wte, n, h, sh_.v_start, sh_.v,
                                   sh_.tp);
  if (sh_.learned_positions)
    embedding_forward(x_, positions_.data(), w_.wpe, n, h, 0, sh_.max_pos, true);
  for (int64_t l = 0; l < sh_.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[size_t(l)];
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln1.w, lw.ln1.b, n);
    with_kind<AttentionKinds>(lw.spec.attention, [&](auto k) {
      decltype(k)::type::decode(tmp_, std::get<k.index>(caches_[size_t(l)]),
                                std::get<k.index>(attn_ws_), ln_, std::get<k.index>(lw.attention),
                                sh_, rows);
    });
    for (int64_t i = 0; i < n * h; ++i) x_[i] += tmp_[i];
    norm_forward(sh_, ln_, mean_, rstd_, x_, lw.ln2.w, lw.ln2.b, n);
    with_kind<MlpKinds>(lw.spec.mlp, [&](auto k) {
      decltype(k)::type::decode(tmp_, std::get<k.index>(mlp_ws_), ln_, std::get<k.index>(lw.mlp),
                                sh_, n);
    });
    for (int64_t i = 0; i < n * h; ++i) x_[i] += tmp_[i];
  }
  norm_forward(sh_, ln_, mean_, rstd_, x_, w_.lnf.w, w_.lnf.b, n);
  linear_forward(logits_local_, ln_, w_.out, nullptr, n, h, sh_.v);
  if (sh_.tp.size() > 1) {  // gather the vocabulary shards: every rank has every row's logits
    const int64_t tp = sh_.tp.size(), vl = sh_.v;
    sh_.tp.tp->all_gather(gathered_, logits_local_, n * vl);  // (tp, n, v/tp)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < tp; ++k)
        copy_bytes(logits_ + (r * tp + k) * vl, gathered_ + (k * n + r) * vl, size_t(vl) * 4);
  }
}

}  // namespace mt
