// Multi-latent attention's decoding: the cache holds per token the normed kv
// latent and the rotated k_pe (rkv + dpe floats a layer); each query row
// up-projects its sequence's cached latents into per-head keys and values
// (the reconstruction; no absorption of W_kv_up into the query yet).
#include <algorithm>
#include <cmath>

#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/blocks/mla_block.h"

namespace mt {

namespace {
void norm_rows(const GptShapes& sh, float* out, float* stat, const float* in, ReadView w,
               ReadView b, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r) {
    if (sh.rms_norm)
      rmsnorm_forward(out + r * c, stat + 1, in + r * c, w, 1, c, sh.eps, sh.zero_centered_gamma);
    else
      layernorm_forward(out + r * c, stat, stat + 1, in + r * c, w, b, 1, c, sh.eps,
                        sh.zero_centered_gamma);
  }
}

// x (dpe) =: Megatron's MLA order ([evens, odds]) rotated at position `pos`.
void rope_row(float* x, float* tmp, const RopeTable& t, int64_t dpe, int64_t pos) {
  const int64_t half = dpe / 2;
  for (int64_t i = 0; i < half; ++i) {
    tmp[i] = x[2 * i];
    tmp[half + i] = x[2 * i + 1];
  }
  rope_forward(tmp, 1, 1, 1, dpe, t, pos);
  std::copy(tmp, tmp + dpe, x);
}
}  // namespace

MlaDecodeWorkspace carve_mla_decode_workspace(Arena& a, const GptShapes& sh,
                                              const DecodeDims& dims) {
  const MlaShapes& m = mla_of(sh);
  const int64_t r = dims.rows, lat = std::max(m.rq, m.rkv) + m.dpe;
  MlaDecodeWorkspace ws;
  ws.q = a.alloc_f32(r * m.a * m.dq());
  ws.lat = a.alloc_f32(2 * r * lat);
  ws.ctx = a.alloc_f32(r * m.a * m.dv);
  ws.seq_lat = a.alloc_f32(dims.span * m.rkv);
  ws.kv = a.alloc_f32(dims.span * m.a * (m.dqk + m.dv));
  ws.scores = a.alloc_f32(dims.span);
  ws.stat = a.alloc_f32(2 + m.dpe);
  return ws;
}

double mla_decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims) {
  const double a = double(c.num_attention_heads) / double(tp), r = double(dims.rows);
  const double span = double(dims.span), dpe = double(c.qk_pos_emb_head_dim);
  const double lat = double(std::max(c.q_lora_rank, c.kv_lora_rank)) + dpe;
  // q; two latent rows; ctx; the sequence's latents, keys|values; scores; statistics
  return r * a * double(c.qk_head_dim) + r * a * dpe + 2 * r * lat +
         r * a * double(c.v_head_dim) + span * double(c.kv_lora_rank) +
         span * a * double(c.qk_head_dim + c.v_head_dim) + span + 2 + dpe;
}

MlaCache MultiLatentAttention::carve_cache(Arena& a, const GptShapes& sh, const KvPoolDims& pool) {
  const MlaShapes& m = mla_of(sh);
  MlaCache cache;
  cache.block_size = pool.block_size;
  cache.latent = a.alloc_f32(pool.blocks * pool.block_size * (m.rkv + m.dpe));
  return cache;
}

// Every TP rank holds the whole latent (the up-projections split the heads).
double MultiLatentAttention::cache_floats(const ModelConfig& c, int64_t, double rows) {
  return rows * double(c.kv_lora_rank + c.qk_pos_emb_head_dim);
}

void mla_block_decode(float* out, const MlaCache& cache, MlaDecodeWorkspace& ws, const float* in,
                      const MlaParams<ReadView>& w, const GptShapes& sh,
                      std::span<const DecodeRow> rows) {
  const MlaShapes& m = mla_of(sh);
  const int64_t h = sh.h, a = m.a, dq = m.dq(), dqk = m.dqk, dv = m.dv, dpe = m.dpe;
  const int64_t n = int64_t(rows.size()), width = m.rkv + dpe, bs = cache.block_size;
  const int64_t lat = std::max(m.rq, m.rkv) + dpe;
  float* tmp = ws.stat + 2;
  auto cache_row = [&](const DecodeRow& r, int64_t pos) {  // the pool's row of position pos
    const int64_t slot = pos % r.ring;
    return cache.latent + (int64_t(r.table[slot / bs]) * bs + slot % bs) * width;
  };
  // Every row's latent and k_pe into its sequence's cache before any query reads it.
  float* raw = ws.lat;
  float* normed = ws.lat + n * lat;
  linear_forward(raw, in, w.kv_down_w, nullptr, n, h, m.rkv);
  if (m.norm) norm_rows(sh, normed, ws.stat, raw, w.kv_norm_w, w.kv_norm_b, n, m.rkv);
  const float* ckv = m.norm ? normed : raw;
  for (int64_t i = 0; i < n; ++i) {
    float* row = cache_row(rows[size_t(i)], rows[size_t(i)].pos);
    std::copy(ckv + i * m.rkv, ckv + (i + 1) * m.rkv, row);
    linear_forward(row + m.rkv, in + i * h, w.kv_down_w.at(m.rkv * h), nullptr, 1, h, dpe);
    rope_row(row + m.rkv, tmp, *m.rope, dpe, rows[size_t(i)].pos);
  }
  // Queries: rotated, scaled by mscale².
  if (m.rq > 0) {
    linear_forward(raw, in, w.q_down_w, nullptr, n, h, m.rq);
    if (m.norm) norm_rows(sh, normed, ws.stat, raw, w.q_norm_w, w.q_norm_b, n, m.rq);
    linear_forward(ws.q, m.norm ? normed : raw, w.q_up_w, nullptr, n, m.rq, a * dq);
  } else {
    linear_forward(ws.q, in, w.q_w, nullptr, n, h, a * dq);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < a; ++j) {
      float* q = ws.q + (i * a + j) * dq;
      rope_row(q + dqk, tmp, *m.rope, dpe, rows[size_t(i)].pos);
      for (int64_t e = 0; e < dq; ++e) q[e] *= m.softmax_factor;
    }
  const float scale = 1.f / std::sqrt(float(dq));
  for (int64_t i = 0; i < n; ++i) {
    const DecodeRow& r = rows[size_t(i)];
    const int64_t span = r.pos + 1;
    for (int64_t p = 0; p < span; ++p)
      std::copy(cache_row(r, p), cache_row(r, p) + m.rkv, ws.seq_lat + p * m.rkv);
    linear_forward(ws.kv, ws.seq_lat, w.kv_up_w, nullptr, span, m.rkv, a * (dqk + dv));
    for (int64_t j = 0; j < a; ++j) {
      const float* q = ws.q + (i * a + j) * dq;
      float top = -INFINITY;
      for (int64_t p = 0; p < span; ++p) {
        const float* k = ws.kv + (p * a + j) * (dqk + dv);
        const float* pe = cache_row(r, p) + m.rkv;
        float dot = 0.f;
        for (int64_t e = 0; e < dqk; ++e) dot += q[e] * k[e];
        for (int64_t e = 0; e < dpe; ++e) dot += q[dqk + e] * pe[e];
        ws.scores[p] = dot * scale;
        top = std::max(top, ws.scores[p]);
      }
      float sum = 0.f;
      for (int64_t p = 0; p < span; ++p) sum += ws.scores[p] = std::exp(ws.scores[p] - top);
      float* ctx = ws.ctx + (i * a + j) * dv;
      std::fill(ctx, ctx + dv, 0.f);
      for (int64_t p = 0; p < span; ++p) {
        const float* v = ws.kv + (p * a + j) * (dqk + dv) + dqk;
        const float wgt = ws.scores[p] / sum;
        for (int64_t e = 0; e < dv; ++e) ctx[e] += wgt * v[e];
      }
    }
  }
  row_parallel_linear_forward(out, out, ws.ctx, w.proj_w, w.proj_b, n, a * dv, h, sh.tp);
}

}  // namespace mt
