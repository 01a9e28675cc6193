#include "model/blocks/mla_block.h"

#include <algorithm>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "model/blocks/block_kinds.h"
#include "model/dropout_sites.h"
#include "parallel/context_parallel_attention.h"
#include "parallel/mappings.h"

namespace mt {

namespace {
// The core's sizes: q, k heads of dq features, v and ctx of dv, this
// micro-batch's documents.
AttentionDims mla_dims(const GptShapes& sh, const MlaShapes& m, const BlockCall* call) {
  AttentionDims dims = attention_dims(sh);
  dims.d = m.dq();
  dims.dv = m.dv;
  if (call) dims.doc_start = call->docs.doc_start;
  return dims;
}

// The latent norm (--normalization's kind) over n rows of c: out =, stats =.
void latent_norm_forward(const GptShapes& sh, WriteView out, float* mean, float* rstd,
                         ReadView in, ReadView w, ReadView b, int64_t n, int64_t c) {
  if (sh.rms_norm)
    rmsnorm_forward(out, rstd, in, w, n, c, sh.eps, sh.zero_centered_gamma);
  else
    layernorm_forward(out, mean, rstd, in, w, b, n, c, sh.eps, sh.zero_centered_gamma);
}
// din =; dw (db) +=.
void latent_norm_backward(const GptShapes& sh, float* din, float* dw, float* db, const float* dout,
                          ReadView in, ReadView w, const float* mean, const float* rstd,
                          int64_t n, int64_t c) {
  fill_zero(din, size_t(n * c) * sizeof(float));
  if (sh.rms_norm)
    rmsnorm_backward(din, dw, dout, in, w, rstd, n, c, sh.zero_centered_gamma);
  else
    layernorm_backward(din, dw, db, dout, in, w, mean, rstd, n, c, sh.zero_centered_gamma);
}

// The whole sequence's input: `in`, or under SP its all-gather into
// `gathered` (fp32, or a bf16 input's elements in the same bytes).
ReadView whole_input(const GptShapes& sh, float* gathered, ReadView in) {
  if (!(sh.tp.sequence_parallel && sh.tp.size() > 1)) return in;
  const int64_t slab = sh.local_tokens() * sh.h;
  if (in.bf16) {
    auto* full = reinterpret_cast<uint16_t*>(gathered);
    gather_from_sp_region_forward(full, in.bf16, slab, *sh.tp.tp);
    return full;
  }
  gather_from_sp_region_forward(gathered, in.f32, slab, *sh.tp.tp);
  return gathered;
}

// f(row of (s, b) tensors, first head row of (b, a, s, ·) per-head tensors,
// c, pos0) for each CP chunk of this rank (one without CP). A head row is one
// head vector: times dq in q, k and their gradients, times dv in v and ctx.
template <class F>
void for_each_chunk(const GptShapes& sh, const MlaShapes& m, F f) {
  const int64_t c = sh.chunk_len();
  for (int64_t j = 0; j < sh.cp_chunks(); ++j)
    f(j * c * sh.b, j * sh.b * m.a * c, c, sh.chunk_pos0(j));
}

// The head row of token (t, bi) of a chunk, head j, in a (b, a, c, ·) tensor.
inline int64_t head_row(const MlaShapes& m, int64_t c, int64_t t, int64_t bi, int64_t j) {
  return (bi * m.a + j) * c + t;
}

// RoPE on the pe features [dqk, dq) of every head vector of one chunk
// (x: its (b, a, c, dq) tensor), at the data's positions with --reset-position-ids.
void rope_pe(float* x, const GptShapes& sh, const MlaShapes& m, const BlockCall& call,
             int64_t rows, int64_t c, int64_t pos0, bool backward) {
  float* pe = x + m.dqk;  // each vector of dq features: its first dpe after dqk rotate
  if (call.docs.positions) {
    const int32_t* pos = call.docs.positions + rows;
    if (backward)
      rope_backward_at(pe, sh.b, m.a, c, m.dq(), *m.rope, pos);
    else
      rope_forward_at(pe, sh.b, m.a, c, m.dq(), *m.rope, pos);
  } else if (backward) {
    rope_backward(pe, sh.b, m.a, c, m.dq(), *m.rope, pos0);
  } else {
    rope_forward(pe, sh.b, m.a, c, m.dq(), *m.rope, pos0);
  }
}

// Megatron's MLA RoPE input order: features (x0, x1, x2, ...) as [x0, x2, ...,
// x1, x3, ...]; interleave undoes it (for gradients).
inline void deinterleave(float* out, const float* in, int64_t dpe) {
  const int64_t half = dpe / 2;
  for (int64_t i = 0; i < half; ++i) {
    out[i] = in[2 * i];
    out[half + i] = in[2 * i + 1];
  }
}
inline void interleave(float* out, const float* in, int64_t dpe) {
  const int64_t half = dpe / 2;
  for (int64_t i = 0; i < half; ++i) {
    out[2 * i] = in[i];
    out[2 * i + 1] = in[half + i];
  }
}
}  // namespace

const MlaShapes& mla_of(const GptShapes& sh) {
  MT_CHECK(sh.kinds != nullptr, "multi-latent attention needs the kinds' shapes "
           "(make_shapes); shapes made by hand have none");
  return shapes_of<MultiLatentAttention>(sh.kinds.get());
}

MlaShapes MultiLatentAttention::make_shapes(const ModelConfig& c, const StageLayout& st,
                                            const GptShapes& sh, const Communicator*) {
  MlaShapes m;
  m.a = c.num_attention_heads / st.tp_size;  // (the memory plan's shapes have no heads)
  m.rq = c.q_lora_rank;
  m.rkv = c.kv_lora_rank;
  m.dqk = c.qk_head_dim;
  m.dpe = c.qk_pos_emb_head_dim;
  m.dv = c.v_head_dim;
  m.norm = c.qk_layernorm;
  const float ms = float(yarn_mscale(c.rotary_scaling_factor, c.mscale_all_dim));
  m.softmax_factor = ms * ms;
  m.rope = std::make_shared<const RopeTable>(
      make_rope_table(std::max<int64_t>(sh.rope_positions, 1), m.dpe, 1.f, c.rotary_base,
                      c.yarn_scaling(c.mla_rope_type() == "yarn")));
  return m;
}

void mla_param_specs(ParamRegistry& reg, const std::string& prefix) {
  const ModelConfig& c = reg.config();
  const int64_t h = c.hidden_size, a = c.num_attention_heads;
  const int64_t dq = c.qk_head_dim + c.qk_pos_emb_head_dim;
  const float std = c.init_method_std;
  // A replicated weight each TP rank only holds its heads' part of the
  // gradient of (summed over TP with the replicated ones).
  auto replicated = [&](const std::string& name, int64_t rows, int64_t cols, Init init, float sd,
                        bool decay) {
    reg.add(prefix + name, rows, cols, cols > 1 ? 2 : 1, -1, init, sd, decay).tp_partial_grad =
        true;
  };
  auto norm = [&](const std::string& name, int64_t width) {
    if (!c.qk_layernorm) return;
    replicated(name + ".weight", width, 1, c.apply_layernorm_1p ? Init::kZeros : Init::kOnes, 0,
               false);
    if (!c.rms_norm()) replicated(name + ".bias", width, 1, Init::kZeros, 0, false);
  };
  if (c.q_lora_rank > 0) {
    replicated("linear_q_down_proj.weight", c.q_lora_rank, h, Init::kNormal, std, true);
    norm("q_layernorm", c.q_lora_rank);
    reg.add(prefix + "linear_q_up_proj.weight", a * dq, c.q_lora_rank, 2, 0, Init::kNormal, std,
            true);
  } else {
    reg.add(prefix + "linear_q_proj.weight", a * dq, h, 2, 0, Init::kNormal, std, true);
  }
  replicated("linear_kv_down_proj.weight", c.kv_lora_rank + c.qk_pos_emb_head_dim, h,
             Init::kNormal, std, true);
  norm("kv_layernorm", c.kv_lora_rank);
  reg.add(prefix + "linear_kv_up_proj.weight", a * (c.qk_head_dim + c.v_head_dim),
          c.kv_lora_rank, 2, 0, Init::kNormal, std, true);
  reg.add(prefix + "linear_proj.weight", h, a * c.v_head_dim, 2, 1, Init::kNormal,
          output_init_std(c), true);
  if (c.add_bias()) reg.add(prefix + "linear_proj.bias", h, 1, 1, -1, Init::kZeros, 0, false);
}

MlaRecord carve_mla_record(Arena& arena, const GptShapes& sh, bool recompute_up) {
  const MlaShapes& m = mla_of(sh);
  const int64_t n = sh.tokens(), heads = sh.b * m.a * sh.s * m.dq();
  const int64_t heads_v = sh.b * m.a * sh.s * m.dv;
  MlaRecord r;
  if (m.rq > 0) {
    r.cq = alloc_act(arena, sh, n * m.rq);
    r.cqn = m.norm ? alloc_act(arena, sh, n * m.rq) : r.cq;
  }
  r.ckv = alloc_act(arena, sh, n * m.rkv);
  r.ckvn = m.norm ? alloc_act(arena, sh, n * m.rkv) : r.ckv;
  if (m.norm) {
    if (m.rq > 0) {
      if (!sh.rms_norm) r.q_mean = arena.alloc_f32(n);
      r.q_rstd = arena.alloc_f32(n);
    }
    if (!sh.rms_norm) r.kv_mean = arena.alloc_f32(n);
    r.kv_rstd = arena.alloc_f32(n);
  }
  r.recompute_up = recompute_up;
  if (recompute_up) {
    r.kpe = arena.alloc_f32(n * m.dpe);
  } else {
    r.q = alloc_act(arena, sh, heads);
    r.k = alloc_act(arena, sh, heads);
    r.v = alloc_act(arena, sh, heads_v);
  }
  r.ctx = arena.alloc_f32(heads_v);
  r.lse = arena.alloc_f32(sh.b * m.a * sh.s);
  r.ctx_sbh = alloc_act(arena, sh, n * m.a * m.dv);
  return r;
}

MlaWorkspace carve_mla_workspace(Arena& arena, const GptShapes& sh) {
  const MlaShapes& m = mla_of(sh);
  const int64_t n = sh.tokens(), heads = sh.b * m.a * sh.s * m.dq();
  const int64_t heads_v = sh.b * m.a * sh.s * m.dv;
  const int64_t lat = std::max(m.rq, m.rkv);
  const AttentionDims dims = mla_dims(sh, m, nullptr);
  MlaWorkspace ws;
  ws.q = arena.alloc_f32(n * m.a * m.dq());
  ws.kv = arena.alloc_f32(n * m.a * (m.dqk + m.dv));
  ws.kpe = arena.alloc_f32(n * m.dpe);
  ws.dlat = arena.alloc_f32(n * lat);
  ws.dlat_in = arena.alloc_f32(n * lat);
  ws.attn = arena.alloc_f32(sh.cp.size() > 1
                                ? context_parallel_attention_workspace_floats(dims, m.a)
                                : attention_workspace_floats(dims));
  ws.dq = arena.alloc_f32(heads);
  ws.dk = arena.alloc_f32(heads);
  ws.dv = arena.alloc_f32(heads_v);
  ws.dctx = arena.alloc_f32(heads_v);
  ws.dctx_sbh = arena.alloc_f32(n * m.a * m.dv);
  if (mla_recomputes_up(sh.layer_specs)) {
    ws.up_q = alloc_act(arena, sh, heads);
    ws.up_k = alloc_act(arena, sh, heads);
    ws.up_v = alloc_act(arena, sh, heads_v);
  }
  return ws;
}

bool mla_recomputes_up(const std::vector<LayerSpec>& specs) {
  return specs_recompute(specs, &LayerSpec::attention,
                         AttentionKinds::index_of<MultiLatentAttention>(),
                         &LayerSpec::recompute_up_proj);
}

// The record (n tokens, a local heads, dq = dqk + dpe), in values of e
// bytes: the latents (rq and rkv, twice each with the norms), q and k as the
// core takes them (2·n·a·dq: k repeats the shared k_pe per head), v (n·a·dv)
// and the projection's input (n·a·dv); fp32: the norms' statistics, ctx
// (n·a·dv) and lse (n·a). recompute_up: k_pe (fp32, n·dpe) for q, k and v.
double mla_record_bytes(const BlockSizes& z, bool recompute_up) {
  const MlaShapes& m = shapes_of<MultiLatentAttention>(z.kinds);
  const double n = z.n, a = double(m.a), norms = m.norm ? 2 : 1, dq = double(m.dq());
  const double dv = double(m.dv);
  const double stats = m.norm ? (m.rq > 0 ? 2 : 1) * z.stats * n : 0.0;
  const double qkv = recompute_up ? 0.0 : 2 * n * a * dq + n * a * dv;
  const double kpe = recompute_up ? n * double(m.dpe) : 0.0;
  return z.e * (norms * n * double(m.rq + m.rkv) + qkv + n * a * dv) +
         4 * (stats + n * a * dv + n * a + kpe);
}

// The workspace, floats: the q and kv up-projections' outputs, k_pe, two
// latent gradients, dq, dk (2·n·a·dq), dv, dctx (2·n·a·dv), the projection's
// input gradient (n·a·dv), and the core's scratch: two (b·a, min(kBlockQ, s),
// s) score blocks (bf16: and their bf16 copies with q, k, v and dctx's), and
// with CP the ring's (one key/value head per query head: 14 chunk tensors of
// k's and v's sizes in fp32, 11 in bf16, and 3 of the query rows).
double mla_workspace_bytes(const BlockSizes& z, bool recompute_up) {
  const MlaShapes& m = shapes_of<MultiLatentAttention>(z.kinds);
  const double n = z.n, a = double(m.a), dq = double(m.dq()), dv = double(m.dv);
  const double hl = a * dq, hv = a * dv;
  const double block = double(std::min<int64_t>(kAttentionBlockQ, z.kv));
  const double score_block = double(z.b) * a * block * double(z.kv);
  const double core = 2 * score_block +
                      (z.bf16 ? (2 * score_block + 2 * n * hl + 2 * n * hv) / 2 : 0.0) +
                      (z.cp > 1 ? (z.bf16 ? 5.5 : 7) * n * (hl + hv) + 1.5 * n * a : 0.0);
  const double up = recompute_up ? z.e * (2 * n * hl + n * hv) : 0.0;  // up_q, up_k, up_v
  return 4.0 * (n * hl + n * a * double(m.dqk + m.dv) + n * double(m.dpe) +
                2 * n * double(std::max(m.rq, m.rkv)) + 2 * n * hl + 3 * n * hv + core) +
         up;
}

double mla_flops(const ModelConfig& c, double tokens) {
  const double h = double(c.hidden_size), a = double(c.num_attention_heads);
  const double dq = double(c.qk_head_dim + c.qk_pos_emb_head_dim), dv = double(c.v_head_dim);
  const double rkv = double(c.kv_lora_rank), s = double(c.seq_length);
  const double q = c.q_lora_rank > 0 ? double(c.q_lora_rank) * (h + a * dq + 1) : h * a * dq;
  const double linear = q + rkv * (h + a * double(c.qk_head_dim + c.v_head_dim) + 1) +
                        h * double(c.qk_pos_emb_head_dim) + a * dv * h;
  const double core = (a * dq / 2 + a * dv / 2) * s;
  return 3 * 2 * tokens * (linear + core);
}

void MultiLatentAttention::plan_gemms(const ModelConfig& c, const PlanDims& d,
                                      std::vector<double>& flops) {
  const double h = d.h, a = double(c.num_attention_heads);
  const double dq = double(c.qk_head_dim + c.qk_pos_emb_head_dim);
  const double rkv = double(c.kv_lora_rank), rq = double(c.q_lora_rank);
  if (c.q_lora_rank > 0) {
    flops.push_back(2 * d.n * h * rq);
    flops.push_back(2 * d.n * rq * a * dq / d.tp);
  } else {
    flops.push_back(2 * d.n * h * a * dq / d.tp);
  }
  flops.push_back(2 * d.n * h * (rkv + double(c.qk_pos_emb_head_dim)));
  flops.push_back(2 * d.n * rkv * a * double(c.qk_head_dim + c.v_head_dim) / d.tp);
  flops.push_back(2 * d.n * a * double(c.v_head_dim) * h / d.tp);
}

namespace {

// The per-head q, k, v the core reads: the record's, or with mla_up_proj
// the workspace's shared ones.
struct MlaQkv {
  WriteView q, k, v;
};
MlaQkv qkv_of(const MlaRecord& rec, const MlaWorkspace& ws) {
  if (rec.recompute_up) return {ws.up_q, ws.up_k, ws.up_v};
  return {rec.q, rec.k, rec.v};
}

// Megatron's qkv_up_proj_and_rope_apply: q (from the normed q latent, or the
// input x without --q-lora-rank) and k_nope | v from the normed kv latent,
// then the per-head q, k (b, a, s, dq) and v (b, a, s, dv) of each chunk, pe
// features de-interleaved and rotated (k's from kpe (n, dpe)), q scaled by
// mscale², into `out` (fp32, or in bf16 runs made in the workspace and
// rounded into it once). Scratch: ws.q, ws.kv (and ws.dq, dk, dv in bf16).
void up_project(const MlaQkv& out, const MlaRecord& rec, ReadView x, const float* kpe,
                MlaWorkspace& ws, const MlaParams<ReadView>& w, const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const MlaShapes& m = mla_of(sh);
  const int64_t n = sh.tokens(), h = sh.h, a = m.a, dq = m.dq(), dqk = m.dqk, dv = m.dv;
  const Compute& cm = sh.cm;
  if (m.rq > 0)
    linear_forward(ws.q, rec.cqn, w.q_up_w, nullptr, n, m.rq, a * dq, cm);
  else
    linear_forward(ws.q, x, w.q_w, nullptr, n, h, a * dq, cm);
  linear_forward(ws.kv, rec.ckvn, w.kv_up_w, nullptr, n, m.rkv, a * (dqk + dv), cm);
  const bool bf16 = out.q.bf16 != nullptr;
  float* q_all = bf16 ? ws.dq : out.q.f32;
  float* k_all = bf16 ? ws.dk : out.k.f32;
  float* v_all = bf16 ? ws.dv : out.v.f32;
  for_each_chunk(sh, m, [&](int64_t rows, int64_t hrow, int64_t c, int64_t pos0) {
    float* q = q_all + hrow * dq;
    float* k = k_all + hrow * dq;
    float* v = v_all + hrow * dv;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < c; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi) {
        const int64_t row = rows + t * sh.b + bi;
        for (int64_t j = 0; j < a; ++j) {
          const int64_t hr = head_row(m, c, t, bi, j), o = hr * dq;
          const float* qs = ws.q + row * a * dq + j * dq;
          const float* kvs = ws.kv + row * a * (dqk + dv) + j * (dqk + dv);
          std::copy(qs, qs + dqk, q + o);
          deinterleave(q + o + dqk, qs + dqk, m.dpe);
          std::copy(kvs, kvs + dqk, k + o);
          deinterleave(k + o + dqk, kpe + row * m.dpe, m.dpe);
          std::copy(kvs + dqk, kvs + dqk + dv, v + hr * dv);
        }
      }
    rope_pe(q, sh, m, call, rows, c, pos0, false);
    rope_pe(k, sh, m, call, rows, c, pos0, false);
  });
  const int64_t heads = sh.b * a * sh.s * dq, heads_v = sh.b * a * sh.s * dv;
  if (m.softmax_factor != 1.f) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < heads; ++i) q_all[i] *= m.softmax_factor;
  }
  if (bf16) {
    convert(out.q, q_all, heads);
    convert(out.k, k_all, heads);
    convert(out.v, v_all, heads_v);
  }
}

}  // namespace

double MultiLatentAttention::plan_recompute(const ModelConfig& c, const PlanDims& d,
                                            const LayerSpec& spec, std::vector<double>& flops) {
  if (!spec.recompute_up_proj) return 0;
  const double h = d.h, a = double(c.num_attention_heads) / d.tp;
  const double dq = double(c.qk_head_dim + c.qk_pos_emb_head_dim);
  const double dqk_v = double(c.qk_head_dim + c.v_head_dim);
  flops.push_back(2 * d.n * (c.q_lora_rank > 0 ? double(c.q_lora_rank) : h) * a * dq);
  flops.push_back(2 * d.n * double(c.kv_lora_rank) * a * dqk_v);
  return 2 * d.n * a * (2 * dq + double(c.v_head_dim));  // q, k, v laid out per head, read back
}

void mla_block_forward(float* out, MlaRecord& rec, MlaWorkspace& ws,
                       const MlaParams<ReadView>& w, const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const MlaShapes& m = mla_of(sh);
  const int64_t n = sh.tokens(), h = sh.h, a = m.a, dv = m.dv;
  const Compute& cm = sh.cm;
  const ReadView x = whole_input(sh, call.full_a, rec.in);  // all-gathered under SP
  if (m.rq > 0) {
    linear_forward(rec.cq, x, w.q_down_w, nullptr, n, h, m.rq, cm);
    if (m.norm)
      latent_norm_forward(sh, rec.cqn, rec.q_mean, rec.q_rstd, rec.cq, w.q_norm_w, w.q_norm_b, n,
                          m.rq);
  }
  linear_forward(rec.ckv, x, w.kv_down_w, nullptr, n, h, m.rkv, cm);
  float* kpe = rec.recompute_up ? rec.kpe : ws.kpe;  // kept for the recompute
  linear_forward(kpe, x, w.kv_down_w.at(m.rkv * h), nullptr, n, h, m.dpe, cm);
  if (m.norm)
    latent_norm_forward(sh, rec.ckvn, rec.kv_mean, rec.kv_rstd, rec.ckv, w.kv_norm_w, w.kv_norm_b,
                        n, m.rkv);
  const MlaQkv qkv = qkv_of(rec, ws);
  up_project(qkv, rec, x, kpe, ws, w, call);
  const bool bf16 = qkv.q.bf16 != nullptr;
  const AttentionDims dims = mla_dims(sh, m, &call);
  const AttentionDropout drop = attention_dropout_spec(sh, call.ctx, call.layer, call.sample0);
  if (sh.cp.size() > 1)
    context_parallel_attention_forward(rec.ctx, rec.lse, qkv.q, qkv.k, qkv.v, dims, a, drop, sh.cp,
                                       ws.attn);
  else
    attention_forward(rec.ctx, rec.lse, qkv.q, qkv.k, qkv.v, dims, drop, ws.attn);
  float* ctx_sbh = bf16 ? ws.dctx_sbh : rec.ctx_sbh.f32;  // fp32, rounded once in bf16 runs
  for_each_chunk(sh, m, [&](int64_t rows, int64_t hrow, int64_t c, int64_t) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < c; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi)
        for (int64_t j = 0; j < a; ++j) {
          const float* src = rec.ctx + (hrow + head_row(m, c, t, bi, j)) * dv;
          std::copy(src, src + dv, ctx_sbh + (rows + t * sh.b + bi) * a * dv + j * dv);
        }
  });
  if (bf16) convert(rec.ctx_sbh, ctx_sbh, n * a * dv);
  row_parallel_linear_forward(out, call.full_a, rec.ctx_sbh, w.proj_w, w.proj_b, n, a * dv, h,
                              sh.tp, sh.cm);
}

void mla_block_backward(float* din, const MlaParams<float*>& g, const float* dout,
                        const MlaRecord& rec, MlaWorkspace& ws, const MlaParams<ReadView>& w,
                        const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const MlaShapes& m = mla_of(sh);
  const int64_t n = sh.tokens(), h = sh.h, a = m.a, dq = m.dq(), dqk = m.dqk, dv = m.dv;
  const bool sp = sh.tp.sequence_parallel && sh.tp.size() > 1;
  const Compute& cm = sh.cm;
  const MlaQkv qkv = qkv_of(rec, ws);
  if (rec.recompute_up)  // mla_up_proj: q, k, v again from the kept latents and k_pe
    up_project(qkv, rec, m.rq > 0 ? rec.in : whole_input(sh, call.full_a, rec.in), rec.kpe, ws,
               w, call);
  row_parallel_linear_backward(ws.dctx_sbh, g.proj_w, g.proj_b, call.full_a, dout, rec.ctx_sbh,
                               w.proj_w, n, a * dv, h, sh.tp, sh.cm);
  for_each_chunk(sh, m, [&](int64_t rows, int64_t hrow, int64_t c, int64_t) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < c; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi)
        for (int64_t j = 0; j < a; ++j) {
          float* dst = ws.dctx + (hrow + head_row(m, c, t, bi, j)) * dv;
          const float* src = ws.dctx_sbh + (rows + t * sh.b + bi) * a * dv + j * dv;
          std::copy(src, src + dv, dst);
        }
  });
  const AttentionDims dims = mla_dims(sh, m, &call);
  const AttentionDropout drop = attention_dropout_spec(sh, call.ctx, call.layer, call.sample0);
  if (sh.cp.size() > 1) {
    // The ring reads the merged ctx as (s, b, a·dv): from the record's heads
    // (fp32; the record's ctx_sbh is bf16 in bf16 runs).
    for_each_chunk(sh, m, [&](int64_t rows, int64_t hrow, int64_t c, int64_t) {
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t t = 0; t < c; ++t)
        for (int64_t bi = 0; bi < sh.b; ++bi)
          for (int64_t j = 0; j < a; ++j) {
            const float* src = rec.ctx + (hrow + head_row(m, c, t, bi, j)) * dv;
            std::copy(src, src + dv, ws.dctx_sbh + (rows + t * sh.b + bi) * a * dv + j * dv);
          }
    });
    context_parallel_attention_backward(ws.dq, ws.dk, ws.dv, ws.dctx, qkv.q, qkv.k, qkv.v,
                                        ws.dctx_sbh, rec.lse, dims, a, drop, sh.cp, ws.attn);
  } else {
    attention_backward(ws.dq, ws.dk, ws.dv, ws.dctx, qkv.q, qkv.k, qkv.v, rec.ctx, rec.lse, dims,
                       drop, ws.attn);
  }
  if (m.softmax_factor != 1.f) {
    const int64_t heads = sh.b * a * sh.s * dq;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < heads; ++i) ws.dq[i] *= m.softmax_factor;
  }
  // Back through RoPE, then into the projections' (s, b, ...) layouts; the
  // shared k_pe's gradient sums the heads'.
  for_each_chunk(sh, m, [&](int64_t rows, int64_t hrow, int64_t c, int64_t pos0) {
    rope_pe(ws.dq + hrow * dq, sh, m, call, rows, c, pos0, true);
    rope_pe(ws.dk + hrow * dq, sh, m, call, rows, c, pos0, true);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < c; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi) {
        const int64_t row = rows + t * sh.b + bi;
        const int64_t dpe = m.dpe, half = dpe / 2;
        float* kpe = ws.kpe + row * dpe;
        std::fill(kpe, kpe + dpe, 0.f);
        for (int64_t j = 0; j < a; ++j) {
          const int64_t hr = hrow + head_row(m, c, t, bi, j), o = hr * dq;
          float* qd = ws.q + row * a * dq + j * dq;
          float* kvd = ws.kv + row * a * (dqk + dv) + j * (dqk + dv);
          std::copy(ws.dq + o, ws.dq + o + dqk, qd);
          interleave(qd + dqk, ws.dq + o + dqk, dpe);
          std::copy(ws.dk + o, ws.dk + o + dqk, kvd);
          std::copy(ws.dv + hr * dv, ws.dv + hr * dv + dv, kvd + dqk);
          for (int64_t i = 0; i < half; ++i) {  // interleaved back, summed over the heads
            kpe[2 * i] += ws.dk[o + dqk + i];
            kpe[2 * i + 1] += ws.dk[o + dqk + half + i];
          }
        }
      }
  });
  // The input's gradient, partial over this rank's heads: the whole
  // sequence's (call.full_b under SP), reduced at the end.
  float* dx = sp ? call.full_b : din;
  const ReadView x = whole_input(sh, call.full_a, rec.in);
  // kv: up-projection, norm, down-projection (latent rows, then k_pe's).
  linear_backward(ws.dlat, g.kv_up_w, nullptr, ws.kv, rec.ckvn, w.kv_up_w, n, m.rkv,
                  a * (dqk + dv), false, cm);
  const float* dckv = ws.dlat;
  if (m.norm) {
    latent_norm_backward(sh, ws.dlat_in, g.kv_norm_w, g.kv_norm_b, ws.dlat, rec.ckv, w.kv_norm_w,
                         rec.kv_mean, rec.kv_rstd, n, m.rkv);
    dckv = ws.dlat_in;
  }
  linear_backward(dx, g.kv_down_w, nullptr, dckv, x, w.kv_down_w, n, h, m.rkv, false, cm);
  linear_backward(dx, g.kv_down_w + m.rkv * h, nullptr, ws.kpe, x,
                  w.kv_down_w.at(m.rkv * h), n, h, m.dpe, true, cm);
  if (m.rq > 0) {
    linear_backward(ws.dlat, g.q_up_w, nullptr, ws.q, rec.cqn, w.q_up_w, n, m.rq, a * dq, false,
                    cm);
    const float* dcq = ws.dlat;
    if (m.norm) {
      latent_norm_backward(sh, ws.dlat_in, g.q_norm_w, g.q_norm_b, ws.dlat, rec.cq, w.q_norm_w,
                           rec.q_mean, rec.q_rstd, n, m.rq);
      dcq = ws.dlat_in;
    }
    linear_backward(dx, g.q_down_w, nullptr, dcq, x, w.q_down_w, n, h, m.rq, true, cm);
  } else {
    linear_backward(dx, g.q_w, nullptr, ws.q, x, w.q_w, n, h, a * dq, true, cm);
  }
  if (sh.tp.size() == 1) return;
  if (sp)
    gather_from_sp_region_backward(din, call.full_b, sh.local_tokens() * h, *sh.tp.tp);
  else
    copy_to_tp_region_backward(din, n * h, *sh.tp.tp);
}

}  // namespace mt
