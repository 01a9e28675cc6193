#include "model/blocks/attention_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/layernorm.h"
#include "kernels/layout.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/dropout_sites.h"
#include "parallel/context_parallel_attention.h"

namespace mt {

namespace {
// Per-head tensors are chunk-major with context parallelism: chunk j of this
// rank's rows is a contiguous (b, a, c, d) tensor at global positions
// chunk_pos0(j). f(j, row offset of the chunk in (s, b, ...) tensors, its
// offset in per-head tensors, global position of its first row).
template <class F>
void for_each_chunk(const GptShapes& sh, F f) {
  const int64_t c = sh.chunk_len();
  for (int64_t j = 0; j < sh.cp_chunks(); ++j)
    f(j * c * sh.b, j * sh.b * sh.a * c * sh.d, sh.chunk_pos0(j));
}

// The core's sizes for this micro-batch: the shapes' and its documents' bounds.
AttentionDims call_dims(const BlockCall& call) {
  AttentionDims dims = attention_dims(call.sh);
  dims.doc_start = call.docs.doc_start;
  return dims;
}

// RoPE of one chunk (x: its per-head tensor; rows: its first row in (s, b)
// tensors; pos0: its global position): at the data's own positions with
// --reset-position-ids.
void rope_chunk(float* x, int64_t heads_count, const BlockCall& call, int64_t rows, int64_t pos0,
                bool backward) {
  const GptShapes& sh = call.sh;
  const int64_t c = sh.chunk_len();
  if (call.docs.positions) {
    const int32_t* pos = call.docs.positions + rows;
    if (backward)
      rope_backward_at(x, sh.b, heads_count, c, sh.d, *sh.rope, pos);
    else
      rope_forward_at(x, sh.b, heads_count, c, sh.d, *sh.rope, pos);
  } else if (backward) {
    rope_backward(x, sh.b, heads_count, c, sh.d, *sh.rope, pos0);
  } else {
    rope_forward(x, sh.b, heads_count, c, sh.d, *sh.rope, pos0);
  }
}

void attention_core_forward(float* ctx, const AttentionRecord& rec, AttentionWorkspace& ws,
                            const BlockCall& call, const AttentionDropout& drop) {
  const GptShapes& sh = call.sh;
  if (sh.cp.size() > 1)
    context_parallel_attention_forward(ctx, rec.lse, rec.q, rec.k, rec.v, call_dims(call), sh.g,
                                       drop, sh.cp, ws.attn);
  else
    attention_forward(ctx, rec.lse, rec.q, rec.k, rec.v, call_dims(call), drop, ws.attn);
}

// --qk-layernorm: the layer's kind of norm over `rows` rows of one head (d).
// out =, rstd (and mean) =.
void head_norm_forward(const GptShapes& sh, WriteView out, float* mean, float* rstd, ReadView in,
                       ReadView w, ReadView b, int64_t rows) {
  if (sh.rms_norm)
    rmsnorm_forward(out, rstd, in, w, rows, sh.d, sh.eps, sh.zero_centered_gamma);
  else
    layernorm_forward(out, mean, rstd, in, w, b, rows, sh.d, sh.eps, sh.zero_centered_gamma);
}

// din =; dw (and db) += (summed over the rows: every head and token).
void head_norm_backward(const GptShapes& sh, float* din, float* dw, float* db, const float* dout,
                        ReadView in, ReadView w, const float* mean, const float* rstd,
                        int64_t rows) {
  fill_zero(din, size_t(rows * sh.d) * sizeof(float));
  if (sh.rms_norm)
    rmsnorm_backward(din, dw, dout, in, w, rstd, rows, sh.d, sh.zero_centered_gamma);
  else
    layernorm_backward(din, dw, db, dout, in, w, mean, rstd, rows, sh.d,
                       sh.zero_centered_gamma);
}
}  // namespace

void attention_param_specs(ParamRegistry& reg, const std::string& prefix) {
  const ModelConfig& cfg = reg.config();
  const int64_t h = cfg.hidden_size, d = cfg.head_dim();
  const float std = cfg.init_method_std;
  const float out_std = output_init_std(cfg);
  // Rows per query group: its heads' q, then its k and v (Megatron core).
  reg.add(prefix + "linear_qkv.weight", cfg.qkv_rows(), h, 2, 0, Init::kNormal, std, true);
  if (cfg.qkv_bias())
    reg.add(prefix + "linear_qkv.bias", cfg.qkv_rows(), 1, 1, 0, Init::kZeros, 0, false);
  // The q/k norms: one weight of d shared by every head, replicated over TP;
  // each rank sees only its heads, so the gradient is summed over TP even
  // without sequence parallelism (Megatron's _allreduce_layernorm_grads).
  if (cfg.qk_layernorm) {
    for (const char* which : {"q_layernorm", "k_layernorm"}) {
      const std::string p = prefix + which;
      const Init gamma = cfg.apply_layernorm_1p ? Init::kZeros : Init::kOnes;  // 1 + 0
      reg.add(p + ".weight", d, 1, 1, -1, gamma, 0, false).tp_partial_grad = true;
      if (!cfg.rms_norm())
        reg.add(p + ".bias", d, 1, 1, -1, Init::kZeros, 0, false).tp_partial_grad = true;
    }
  }
  reg.add(prefix + "linear_proj.weight", h, cfg.query_projection_size(), 2, 1, Init::kNormal,
          out_std, true);
  if (cfg.add_bias()) reg.add(prefix + "linear_proj.bias", h, 1, 1, -1, Init::kZeros, 0, false);
}

AttentionRecord carve_attention_record(Arena& arena, const GptShapes& sh) {
  const int64_t heads = sh.b * sh.a * sh.s * sh.d;
  AttentionRecord r;
  r.q = alloc_act(arena, sh, heads);
  r.k = alloc_act(arena, sh, heads);
  r.v = alloc_act(arena, sh, heads);
  if (sh.cm.math != MathMode::kBF16) r.ctx = arena.alloc_f32(heads);
  r.lse = arena.alloc_f32(sh.b * sh.a * sh.s);
  r.ctx_sbh = alloc_act(arena, sh, sh.tokens() * sh.a * sh.d);
  if (sh.qk_layernorm) {
    const int64_t rows = sh.b * sh.a * sh.s;
    r.q_in = alloc_act(arena, sh, heads);
    r.k_in = alloc_act(arena, sh, heads);
    if (!sh.rms_norm) r.q_mean = arena.alloc_f32(rows);
    r.q_rstd = arena.alloc_f32(rows);
    if (!sh.rms_norm) r.k_mean = arena.alloc_f32(rows);
    r.k_rstd = arena.alloc_f32(rows);
  }
  return r;
}

AttentionWorkspace carve_attention_workspace(Arena& arena, const GptShapes& sh) {
  const int64_t n = sh.tokens(), heads = sh.b * sh.a * sh.s * sh.d;
  AttentionWorkspace ws;
  ws.qkv = arena.alloc_f32(n * (sh.a + 2 * sh.g) * sh.d);
  ws.attn = arena.alloc_f32(sh.cp.size() > 1 ? context_parallel_attention_workspace_floats(
                                                   attention_dims(sh), sh.g)
                                             : attention_workspace_floats(attention_dims(sh)));
  ws.dq = arena.alloc_f32(heads);
  ws.dk = arena.alloc_f32(heads);
  ws.dv = arena.alloc_f32(heads);
  ws.dctx = arena.alloc_f32(heads);
  ws.dctx_sbh = arena.alloc_f32(n * sh.a * sh.d);
  return ws;
}

// The record: q, k, v and ctx_sbh (4 · n·hl saved values; grouped-query
// attention keeps k, v repeated per head), in fp32 runs also ctx in the
// kernel's (b, a, s, d) layout (n·hl floats), and lse (n·a floats).
// Korthikanti et al. 2022, eq. 1 (attention part, f = 4h, t = 1: 11sbh +
// 5as²b bytes in fp16): Q, K 4 ↔ q, k; V 2 ↔ v; projection input 2 ↔ ctx_sbh;
// the dropout mask 1 ↔ none (Philox masks are regenerated from their keys);
// softmax out, its mask and dropout out 5as²b ↔ lse (the probabilities are
// recomputed from it: already what Megatron calls selective recompute).
// --qk-layernorm adds the norms' inputs q and k (2 · n·hl values, k repeated
// per head as in the record) and their statistics (2 · stats · n·a fp32).
double attention_record_bytes(const BlockSizes& z) {
  const double qk_norm = z.qk_norm ? z.e * 2 * z.n * z.hl + 4 * 2 * z.stats * z.n * z.a : 0.0;
  return z.e * 4 * z.n * z.hl + (z.bf16 ? 0.0 : 4 * z.n * z.hl) + 4 * z.n * z.a + qk_norm;
}

// The workspace, floats:
//   qkv (s, b, (a + 2g)·d/t)                  n·qkv  (3 · n·hl without GQA)
//   dq, dk, dv, dctx (b, a, s, d); dctx_sbh   5 · n·hl
//   attention: two (b·a, min(kBlockQ, s), s) score blocks (attention.h);
//   bf16 adds those two and q, k, v, dctx (b, a, s, d) as bf16 copies
//   context parallelism: the kernel's blocks are (chunk x chunk), chunk =
//   s/(2cp), and the ring adds two travelling K|V group buffers (2 · 2n·hg,
//   hg = g·d = hl·g/a), K|V repeated per head (2n·hl), dK|dV group sums two
//   outgoing and one incoming (3 · 2n·hg), a block's ctx, dq, dk, dv
//   (4 · n·hl/2) and lse plus the rows' D (3 · n·a/2):
//   10·n·hg + 4·n·hl + 1.5·n·a; bf16 keeps the K|V buffers in bf16 (half
//   of 4·n·hg and of 2n·hl): 8·n·hg + 3·n·hl + 1.5·n·a
double attention_workspace_bytes(const BlockSizes& z) {
  const double n = z.n, hl = z.hl, a = z.a;
  const double qkv = hl + 2 * hl * z.g / a;
  const double block = double(std::min<int64_t>(kAttentionBlockQ, z.kv));
  const double score_block = double(z.b) * a * block * double(z.kv);
  const double attention =
      2 * score_block + (z.bf16 ? (2 * score_block + 4 * n * hl) / 2 : 0.0) +
      (z.cp > 1 ? (z.bf16 ? 8 : 10) * n * hl * z.g / a + (z.bf16 ? 3 : 4) * n * hl + 1.5 * n * a
                : 0.0);
  return 4.0 * (n * qkv + 5 * n * hl + attention);
}

// Megatron-LM's count: QKV and projection (k and v shrink with query groups)
// and the attention products (causal: half), all scaled by the query
// projection's width over the hidden size (a·d / h: 1 without --kv-channels).
// The q/k norms are not counted (nor are the layer's norms).
double attention_flops(const ModelConfig& c, double tokens) {
  const double h = double(c.hidden_size), s = double(c.seq_length);
  const double groups = double(c.query_groups()) / double(c.num_attention_heads);
  const double ratio = double(c.query_projection_size()) / h;
  return 12.0 * tokens * h * h * (1.0 + groups + s / h / 2.0) * ratio;
}

void attention_block_forward(float* out, AttentionRecord& rec, AttentionWorkspace& ws,
                             const AttentionParams<ReadView>& w, const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const int64_t n = sh.tokens(), h = sh.h, hl = sh.a * sh.d;
  const int64_t qkv = (sh.a + 2 * sh.g) * sh.d;
  const int64_t c = sh.chunk_len();
  column_parallel_linear_forward(ws.qkv, call.full_a, rec.in, w.qkv_w, w.qkv_b, n, h, qkv, sh.tp,
                                 sh.cm);
  // q, k, v in fp32 (the record's, or in bf16 runs workspace), RoPE, then
  // (bf16) rounded into the record once.
  const bool bf16 = rec.q.bf16 != nullptr;
  float* q = bf16 ? ws.dq : rec.q.f32;
  float* k = bf16 ? ws.dk : rec.k.f32;
  float* v = bf16 ? ws.dv : rec.v.f32;
  const int64_t heads = sh.b * sh.a * sh.s * sh.d;
  // --qk-layernorm: q and k as projected go to the record (fp32 runs: there
  // directly; bf16: rounded from the fp32 workspace, and the norm reads the
  // rounded values, as its backward will), normalized into q and k.
  const bool qk_norm = sh.qk_layernorm;
  float* q_proj = qk_norm && !bf16 ? rec.q_in.f32 : q;
  float* k_proj = qk_norm && !bf16 ? rec.k_in.f32 : k;
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t) {
    qkv_to_heads(q_proj + heads, k_proj + heads, v + heads, ws.qkv + rows * qkv, c, sh.b, sh.a,
                 sh.g, sh.d);
  });
  if (qk_norm) {
    if (bf16) {
      convert(rec.q_in, q, heads);
      convert(rec.k_in, k, heads);
    }
    const int64_t rows = sh.b * sh.a * sh.s;
    head_norm_forward(sh, q, rec.q_mean, rec.q_rstd, rec.q_in, w.q_norm_w, w.q_norm_b, rows);
    head_norm_forward(sh, k, rec.k_mean, rec.k_rstd, rec.k_in, w.k_norm_w, w.k_norm_b, rows);
  }
  if (sh.rope)
    for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t pos0) {
      rope_chunk(q + heads, sh.a, call, rows, pos0, false);
      rope_chunk(k + heads, sh.a, call, rows, pos0, false);
    });
  if (bf16) {
    convert(rec.q, q, heads);
    convert(rec.k, k, heads);
    convert(rec.v, v, heads);
  }
  float* attn_out = bf16 ? ws.dctx : rec.ctx;
  attention_core_forward(attn_out, rec, ws, call,
                         attention_dropout_spec(sh, call.ctx, call.layer, call.sample0));
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t) {
    heads_to_sbh(rec.ctx_sbh.at(rows * hl), attn_out + heads, c, sh.b, sh.a, sh.d);
  });
  row_parallel_linear_forward(out, call.full_a, rec.ctx_sbh, w.proj_w, w.proj_b, n, hl, h, sh.tp,
                              sh.cm);
}

void attention_block_backward(float* din, const AttentionParams<float*>& g, const float* dout,
                              const AttentionRecord& rec, AttentionWorkspace& ws,
                              const AttentionParams<ReadView>& w, const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const int64_t n = sh.tokens(), h = sh.h, hl = sh.a * sh.d;
  const int64_t qkv = (sh.a + 2 * sh.g) * sh.d;
  const int64_t c = sh.chunk_len();
  row_parallel_linear_backward(ws.dctx_sbh, g.proj_w, g.proj_b, call.full_a, dout, rec.ctx_sbh,
                               w.proj_w, n, hl, h, sh.tp, sh.cm);
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t) {
    sbh_to_heads(ws.dctx + heads, ws.dctx_sbh + rows * hl, c, sh.b, sh.a, sh.d);
  });
  const AttentionDropout drop = attention_dropout_spec(sh, call.ctx, call.layer, call.sample0);
  if (sh.cp.size() > 1)
    context_parallel_attention_backward(ws.dq, ws.dk, ws.dv, ws.dctx, rec.q, rec.k, rec.v,
                                        rec.ctx_sbh, rec.lse, call_dims(call), sh.g, drop, sh.cp,
                                        ws.attn);
  else
    attention_backward(ws.dq, ws.dk, ws.dv, ws.dctx, rec.q, rec.k, rec.v, rec.ctx, rec.lse,
                       call_dims(call), drop, ws.attn);
  if (sh.rope)
    for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t pos0) {
      rope_chunk(ws.dq + heads, sh.a, call, rows, pos0, true);
      rope_chunk(ws.dk + heads, sh.a, call, rows, pos0, true);
    });
  // --qk-layernorm: through the norms; their input gradients land in buffers
  // free by now (dctx after the attention backward, then dq after q's norm).
  float* dq = ws.dq;
  float* dk = ws.dk;
  if (sh.qk_layernorm) {
    const int64_t rows = sh.b * sh.a * sh.s;
    head_norm_backward(sh, ws.dctx, g.q_norm_w, g.q_norm_b, ws.dq, rec.q_in, w.q_norm_w,
                       rec.q_mean, rec.q_rstd, rows);
    head_norm_backward(sh, ws.dq, g.k_norm_w, g.k_norm_b, ws.dk, rec.k_in, w.k_norm_w,
                       rec.k_mean, rec.k_rstd, rows);
    dq = ws.dctx;
    dk = ws.dq;
  }
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t) {
    heads_to_qkv(ws.qkv + rows * qkv, dq + heads, dk + heads, ws.dv + heads, c, sh.b, sh.a, sh.g,
                 sh.d);
  });
  column_parallel_linear_backward(din, g.qkv_w, g.qkv_b, call.full_a, call.full_b, ws.qkv, rec.in,
                                  w.qkv_w, n, h, qkv, sh.tp, sh.cm);
}

AttentionDecodeWorkspace carve_attention_decode_workspace(Arena& arena, const GptShapes& sh,
                                                          const DecodeDims& dims) {
  const int64_t hl = sh.a * sh.d, kvl = sh.g * sh.d, r = dims.rows;
  AttentionDecodeWorkspace ws;
  ws.qkv = arena.alloc_f32(r * (hl + 2 * kvl));
  ws.q = arena.alloc_f32(r * hl);
  ws.ctx = arena.alloc_f32(r * hl);
  ws.scores = arena.alloc_f32(dims.span);
  if (sh.qk_layernorm) {
    if (!sh.rms_norm) ws.mean = arena.alloc_f32(r * sh.a);
    ws.rstd = arena.alloc_f32(r * sh.a);
  }
  return ws;
}

double attention_decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims) {
  const double d = double(c.head_dim()), a = double(c.num_attention_heads) / double(tp);
  const double hl = a * d, kvl = double(c.query_groups()) / double(tp) * d;
  const double r = double(dims.rows);
  const double norm_stats = c.qk_layernorm ? (c.rms_norm() ? 1 : 2) * r * a : 0.0;  // (mean,) rstd
  // qkv; q, ctx; scores; statistics
  return r * (hl + 2 * kvl) + 2 * r * hl + double(dims.span) + norm_stats;
}

void attention_block_decode(float* out, const KvCache& cache, AttentionDecodeWorkspace& ws,
                            const float* in, const AttentionParams<ReadView>& w,
                            const GptShapes& sh, std::span<const DecodeRow> rows) {
  const int64_t h = sh.h, d = sh.d, a = sh.a, g = sh.g, hl = a * d, kvl = g * d;
  const int64_t hpg = a / g, qkv = hl + 2 * kvl, n = int64_t(rows.size());
  const int64_t bs = cache.block_size;
  auto cache_row = [&](const DecodeRow& r) {  // the row of the pool that holds r's position
    const int64_t slot = r.pos % r.ring;
    return (int64_t(r.table[slot / bs]) * bs + slot % bs) * kvl;
  };
  linear_forward(ws.qkv, in, w.qkv_w, w.qkv_b, n, h, qkv);  // column-parallel
  // Every row's key and value into its sequence's cache before any query reads it.
  for (int64_t i = 0; i < n; ++i) {
    const DecodeRow& r = rows[size_t(i)];
    float* q = ws.q + i * hl;
    float* k = cache.k + cache_row(r);
    float* v = cache.v + cache_row(r);
    for (int64_t gi = 0; gi < g; ++gi) {  // qkv rows are (g_local, a/g + 2, d)
      const float* grp = ws.qkv + i * qkv + gi * (hpg + 2) * d;
      copy_bytes(q + gi * hpg * d, grp, size_t(hpg * d) * 4);
      copy_bytes(k + gi * d, grp + hpg * d, size_t(d) * 4);
      copy_bytes(v + gi * d, grp + (hpg + 1) * d, size_t(d) * 4);
    }
    if (sh.qk_layernorm) {  // the new key's g rows, through ctx (free until attention)
      head_norm_forward(sh, ws.ctx, ws.mean, ws.rstd, k, w.k_norm_w, w.k_norm_b, g);
      copy_bytes(k, ws.ctx, size_t(kvl) * 4);
    }
    if (sh.rope) rope_forward(k, 1, g, 1, d, *sh.rope, r.pos);  // this position's rotation
  }
  if (sh.qk_layernorm) {  // the queries' R·a rows, through ctx
    head_norm_forward(sh, ws.ctx, ws.mean, ws.rstd, ws.q, w.q_norm_w, w.q_norm_b, n * a);
    copy_bytes(ws.q, ws.ctx, size_t(n * hl) * 4);
  }
  for (int64_t i = 0; i < n; ++i) {
    const DecodeRow& r = rows[size_t(i)];
    float* q = ws.q + i * hl;
    if (sh.rope) rope_forward(q, 1, a, 1, d, *sh.rope, r.pos);
    const int64_t first = sh.window_left >= 0 ? std::max<int64_t>(0, r.pos - sh.window_left) : 0;
    const PagedKv kv{cache.k, cache.v, bs, r.table, r.ring, g, d};
    attention_decode_forward(ws.ctx + i * hl, ws.scores, q, a, kv, first, r.pos);
  }
  row_parallel_linear_forward(out, out, ws.ctx, w.proj_w, w.proj_b, n, hl, h, sh.tp);
}

void SelfAttention::plan_gemms(const ModelConfig& c, const PlanDims& d,
                               std::vector<double>& flops) {
  flops.push_back(2 * d.n * d.h * double(c.qkv_rows()) / d.tp);
  flops.push_back(2 * d.n * double(c.query_projection_size()) * d.h / d.tp);
}

KvCache SelfAttention::carve_cache(Arena& a, const GptShapes& sh, const KvPoolDims& pool) {
  const int64_t rows = pool.blocks * pool.block_size, kvl = sh.g * sh.d;  // a head per group
  KvCache cache;
  cache.block_size = pool.block_size;
  cache.k = a.alloc_f32(rows * kvl);
  cache.v = a.alloc_f32(rows * kvl);
  return cache;
}

double SelfAttention::cache_floats(const ModelConfig& c, int64_t tp, double rows) {
  return 2 * rows * double(c.query_groups()) / double(tp) * double(c.head_dim());
}

}  // namespace mt
