// Causal attention, blocked over queries (see attention.h).
//
// For the query block [q0, q0 + bq) only keys [k_lo, kv = q0 + bq) can be seen
// (k_lo = 0, or with a sliding window L or documents the first query's first
// visible key, the least over the samples), so each
// block is two (forward) or five (backward) batched oneDNN matmuls over all
// b·a heads, with (b·a, bq, kv) scores in the workspace, plus an OpenMP pass
// over the bq·b·a score rows for the softmax / its gradient. In bf16/fp16 the
// matmuls round their operands and accumulate in fp32; in bf16 the row passes
// store P and dS·scale only as the bf16 operands (rounded once, from the same
// fp32 values as in fp16 and fp32), never as fp32 rows.
// The row passes are compiled once, for the build's -march (no on_isa paths,
// kernels/cpu_isa.h): compiled per instruction set their sums round
// differently (~3e-7), which moves GoldenQwen2's five AdamW steps past its
// 1e-5 bar (the k bias's gradient is round-off that AdamW normalises). The
// dropout mask has paths (dropout_multipliers), bit for bit the same.
#include "kernels/attention.h"
#include "kernels/attention_small.h"

#include <algorithm>
#include <initializer_list>
#include <cmath>
#include <limits>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/dropout.h"
#include "kernels/matmul.h"
#include "kernels/vec_math.h"

namespace mt {
namespace {

// Resolved sizes shared by forward and backward.
struct AttentionPlan {
  int64_t b, a, s, d, bh, block;
  int64_t dv;        // v's and ctx's head dim
  int64_t sk, q_pos0, k_pos0, s_global;  // keys, positions, dropout sequence length
  int64_t a_global;  // heads of the whole model (dropout index); defaults to a
  int64_t window;    // sliding window L (-1: none)
  const int32_t* doc_start;  // (b, s_global) or null
  float scale;       // 1 / sqrt(d)
  MathMode math;     // of the matmuls

  // Keys [first(bi, qi), visible(qi)) of the block are visible to local query
  // qi of sample bi (an empty range when first >= visible).
  int64_t visible(int64_t qi) const {
    return std::clamp<int64_t>(q_pos0 + qi - k_pos0 + 1, 0, sk);
  }
  int64_t first(int64_t bi, int64_t qi) const {
    int64_t lo = window < 0 ? 0 : q_pos0 + qi - window;  // a global position
    if (doc_start) lo = std::max<int64_t>(lo, doc_start[bi * s_global + q_pos0 + qi]);
    return std::clamp<int64_t>(lo - k_pos0, 0, sk);
  }
  // The least first key of query qi over the samples (both bounds only grow
  // along the queries, so query q0's is the block's).
  int64_t first_of_block(int64_t qi) const {
    if (doc_start == nullptr) return first(0, qi);
    int64_t lo = sk;
    for (int64_t bi = 0; bi < b; ++bi) lo = std::min(lo, first(bi, qi));
    return lo;
  }
  // Key ranges that slide (a window or documents): backward zeroes dk, dv first.
  bool sliding() const { return window >= 0 || doc_start != nullptr; }
};

AttentionPlan make_plan(const AttentionDims& dims, const AttentionDropout& drop) {
  MT_CHECK(dims.b > 0 && dims.a > 0 && dims.s > 0 && dims.d > 0,
           "attention: all dims must be positive, got b=", dims.b, " a=", dims.a, " s=", dims.s,
           " d=", dims.d, "; fix: fill AttentionDims");
  MT_CHECK(dims.dv >= 0, "attention: v head dim dv=", dims.dv,
           " is negative; fix: give AttentionDims.dv > 0, or 0 for dv = d");
  MT_CHECK(drop.p >= 0.f && drop.p < 1.f, "attention: dropout p=", drop.p,
           " is outside [0, 1); fix: use a probability below 1");
  AttentionPlan pl;
  pl.b = dims.b;
  pl.a = dims.a;
  pl.s = dims.s;
  pl.d = dims.d;
  pl.dv = attention_dv(dims);
  pl.sk = dims.sk > 0 ? dims.sk : dims.s;
  pl.q_pos0 = dims.q_pos0;
  pl.k_pos0 = dims.k_pos0;
  pl.s_global = dims.s_global > 0 ? dims.s_global : dims.s;
  MT_CHECK(dims.sk >= 0 && pl.q_pos0 >= 0 && pl.k_pos0 >= 0 &&
               pl.q_pos0 + pl.s <= pl.s_global && pl.k_pos0 + pl.sk <= pl.s_global,
           "attention: queries [", pl.q_pos0, ", ", pl.q_pos0 + pl.s, ") or keys [", pl.k_pos0,
           ", ", pl.k_pos0 + pl.sk, ") outside the sequence [0, ", pl.s_global,
           "); fix: set AttentionDims.s_global to the whole sequence length");
  pl.bh = dims.b * dims.a;
  pl.block = std::min(kAttentionBlockQ, dims.s);
  pl.a_global = drop.a_global > 0 ? drop.a_global : dims.a;
  MT_CHECK(drop.head0 >= 0 && drop.head0 + dims.a <= pl.a_global, "attention: heads [", drop.head0,
           ", ", drop.head0 + dims.a, ") exceed a_global=", pl.a_global,
           "; fix: set AttentionDropout.a_global to the model's head count");
  MT_CHECK(dims.window_left >= -1, "attention: window_left=", dims.window_left,
           "; fix: a window of L >= 0 keys before the query, or -1 for none");
  pl.window = dims.window_left;
  pl.doc_start = dims.doc_start;
  pl.scale = 1.f / std::sqrt(float(dims.d));
  pl.math = dims.math;
  return pl;
}

// Global dropout index of element (bh, qi, ki = 0).
inline uint64_t dropout_row_base(const AttentionPlan& pl, const AttentionDropout& drop, int64_t bh,
                                 int64_t qi) {
  const int64_t bi = bh / pl.a, j = bh % pl.a;
  return uint64_t(
      (((drop.sample0 + bi) * pl.a_global + drop.head0 + j) * pl.s_global + pl.q_pos0 + qi) *
          pl.s_global +
      pl.k_pos0);
}

// Softmax backward of one score row of query qi with nk visible keys, given
// D = Σ_j P_j dP̃_j:  p_row: S → dropout(P);  dp_row: dP → dS·scale, where
// dP̃_j = m_j dP_j is the gradient after the dropout multiplier m_j.
// The results go to p_out and ds_out: p_row and dp_row themselves (fp32, and
// fp16 whose matmuls round fp32 operands) or the bf16 operands of the matmuls.
template <class T>
inline void softmax_backward_row(const float* p_row, const float* dp_row, T* p_out, T* ds_out,
                                 int64_t nk, float row_lse, float dsum, const AttentionPlan& pl,
                                 const AttentionDropout& drop, uint64_t base, float keep_scale) {
  if (drop.p <= 0.f) {
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) {
      const float pr = exp_f32(p_row[j] * pl.scale - row_lse);
      store_f32(ds_out, j, pl.scale * pr * (dp_row[j] - dsum));
      store_f32(p_out, j, pr);
    }
    return;
  }
  float mult[kDropoutRun];
  for (int64_t j0 = 0, w = 0; j0 < nk; j0 += w) {
    w = dropout_run(base + uint64_t(j0), nk - j0);
    dropout_multipliers(mult, w, base + uint64_t(j0), drop.rng, drop.p, keep_scale);
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      const float pr = exp_f32(p_row[j0 + j] * pl.scale - row_lse);
      store_f32(ds_out, j0 + j, pl.scale * pr * (dp_row[j0 + j] * mult[j] - dsum));
      store_f32(p_out, j0 + j, pr * mult[j]);
    }
  }
}

// The same in bf16/fp16, with D summed over the row from the dP the
// low-precision matmul produced, not as dctx · ctx: the two agree only up to
// the rounding of dctx, v and P, and with the row's own D the softmax
// gradient sums to zero over the row, as the gradient of the rounded forward
// does. Two passes; between them p_row holds P_j with the sign bit set where
// dropout dropped element j (-0 for P_j = 0 stays distinguishable). The
// second pass stores dropout(P) and dS·scale into p_out and ds_out: p_row and
// dp_row themselves (fp16: the matmuls round fp32 operands), or the bf16
// operands of the matmuls (bf16: the fp32 results are never stored).
template <class T>
inline void softmax_backward_row_own_d(float* p_row, float* dp_row, T* p_out, T* ds_out,
                                       int64_t nk, float row_lse, const AttentionPlan& pl,
                                       const AttentionDropout& drop, uint64_t base,
                                       float keep_scale) {
  float dsum = 0.f;
  if (drop.p <= 0.f) {
#pragma omp simd reduction(+ : dsum)
    for (int64_t j = 0; j < nk; ++j) {
      const float pr = exp_f32(p_row[j] * pl.scale - row_lse);
      p_row[j] = pr;
      dsum += pr * dp_row[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) {
      const float pr = p_row[j];
      store_f32(ds_out, j, pl.scale * pr * (dp_row[j] - dsum));
      store_f32(p_out, j, pr);
    }
    return;
  }
  float mult[kDropoutRun];
  for (int64_t j0 = 0, w = 0; j0 < nk; j0 += w) {
    w = dropout_run(base + uint64_t(j0), nk - j0);
    dropout_multipliers(mult, w, base + uint64_t(j0), drop.rng, drop.p, keep_scale);
#pragma omp simd reduction(+ : dsum)
    for (int64_t j = 0; j < w; ++j) {
      const float pr = exp_f32(p_row[j0 + j] * pl.scale - row_lse);
      const float dpm = dp_row[j0 + j] * mult[j];  // dP̃_j
      dp_row[j0 + j] = dpm;
      dsum += pr * dpm;
      p_row[j0 + j] = mult[j] > 0.f ? pr : -pr;
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < nk; ++j) {
    const float pr = std::fabs(p_row[j]);
    const bool kept = !std::signbit(p_row[j]);
    store_f32(ds_out, j, pl.scale * pr * (dp_row[j] - dsum));
    store_f32(p_out, j, kept ? pr * keep_scale : 0.f);
  }
}

// The three batched products. Each operand comes as fp32 and, in bf16, also
// as its bf16 copy in the workspace (x16, same layout; null otherwise), which
// the matmul then reads instead of converting the fp32 one.

// scores (bh, bq, kv) = q[:, q0:q0+bq] (bq, w) · k[:, 0:kv] (kv, w)ᵀ (q rows of
// stride s·w per head, keys sk·w; w = d); also used
// for dP = dctx · vᵀ (w = dv).                                           [=]
void block_times_keys_t(float* scores, const float* q_block, const float* keys,
                        const uint16_t* q_block16, const uint16_t* keys16,
                        const AttentionPlan& pl, int64_t bq, int64_t kv, int64_t w) {
  MatmulShape sh;
  sh.batch = pl.bh;
  sh.m = bq;
  sh.n = kv;
  sh.k = w;
  sh.trans_b = true;
  sh.batch_stride_a = pl.s * w;
  sh.batch_stride_b = pl.sk * w;
  sh.math = pl.math;
  matmul(scores, q_block, keys, nullptr, sh, keys16, q_block16);
}

// out[:, q0:q0+bq] (bq, w) = probs (bh, bq, kv) · vals[:, 0:kv] (kv, w)   [=]
// (out of stride s·w per head, vals sk·w; w = dv for ctx, d for dq)
void probs_times_values(float* out_block, const float* probs, const float* vals,
                        const uint16_t* probs16, const uint16_t* vals16, const AttentionPlan& pl,
                        int64_t bq, int64_t kv, int64_t w) {
  MatmulShape sh;
  sh.batch = pl.bh;
  sh.m = bq;
  sh.n = w;
  sh.k = kv;
  sh.batch_stride_b = pl.sk * w;
  sh.batch_stride_c = pl.s * w;
  sh.math = pl.math;
  matmul(out_block, probs, vals, nullptr, sh, vals16, probs16);
}

// out[:, 0:kv] (kv, w) (+)= probs (bh, bq, kv)ᵀ · rows[:, q0:q0+bq] (bq, w)
// (out of stride sk·w per head, rows s·w; w = dv for dv, d for dk)
void probs_t_times_rows(float* out, const float* probs, const float* rows_block,
                        const uint16_t* probs16, const uint16_t* rows_block16,
                        const AttentionPlan& pl, int64_t bq, int64_t kv, int64_t w,
                        bool accumulate) {
  MatmulShape sh;
  sh.batch = pl.bh;
  sh.m = kv;
  sh.n = w;
  sh.k = bq;
  sh.trans_a = true;
  sh.batch_stride_b = pl.s * w;
  sh.batch_stride_c = pl.sk * w;
  sh.accumulate = accumulate;
  sh.math = pl.math;
  matmul(out, probs, rows_block, nullptr, sh, rows_block16, probs16);
}

// The workspace, in floats from its start; each part begins on 64 bytes.
//   fp32 (bh, block, sk): scores (S, then P), dscores (dP, then dS·scale);
//   bf16 only: p16, ds16 (bh, block, sk), q16 (bh, s, d), k16 (bh, sk, d),
//   v16 (bh, sk, dv) and dctx16 (bh, s, dv).
// In bf16 the rows of P and dS are rounded by the row passes while in cache,
// and q, k, v, dctx once per call, instead of by every matmul.
struct WorkspaceLayout {
  int64_t scores = 0, dscores = 0, p16 = 0, ds16 = 0, q16 = 0, k16 = 0, v16 = 0, dctx16 = 0;
  int64_t total = 0;
};

WorkspaceLayout workspace_layout(const AttentionDims& dims) {
  auto part = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  const int64_t block = std::min(kAttentionBlockQ, dims.s), sk = dims.sk > 0 ? dims.sk : dims.s;
  const int64_t scores = dims.b * dims.a * block * sk;
  const int64_t q_rows = dims.b * dims.a * dims.s * dims.d, k_rows = dims.b * dims.a * sk * dims.d;
  const int64_t dv = attention_dv(dims);
  const int64_t ctx_rows = dims.b * dims.a * dims.s * dv, v_rows = dims.b * dims.a * sk * dv;
  WorkspaceLayout w;
  w.dscores = part(scores);
  w.total = w.dscores + part(scores);
  if (dims.math == MathMode::kBF16) {
    const int64_t scores16 = part((scores + 1) / 2);
    const int64_t q16 = part((q_rows + 1) / 2), k16 = part((k_rows + 1) / 2);
    const int64_t v16 = part((v_rows + 1) / 2), ctx16 = part((ctx_rows + 1) / 2);
    w.p16 = w.total;
    w.ds16 = w.p16 + scores16;
    w.q16 = w.ds16 + scores16;
    w.k16 = w.q16 + q16;
    w.v16 = w.k16 + k16;
    w.dctx16 = w.v16 + v16;
    w.total = w.dctx16 + ctx16;
  }
  return w;
}

uint16_t* bf16_part(float* workspace, int64_t offset) {
  return reinterpret_cast<uint16_t*>(workspace + offset);
}

// out[j] = e[j] · inv (times the dropout multiplier) for the nk visible
// keys, the row's entries [lo, lo + nk), and 0 for the masked ones of the
// row's kv; out may be e itself (fp32) or bf16. key0: the block key of entry 0.
template <class T>
inline void normalize_row(T* out, const float* e, int64_t lo, int64_t nk, int64_t kv, float inv,
                          const AttentionPlan& pl, const AttentionDropout& drop, int64_t h,
                          int64_t qi, int64_t key0, float keep_scale) {
  std::fill(out, out + lo, T(0));  // bf16 +0 is 0x0000 too
  T* o = out + lo;
  const float* x = e + lo;
  if (drop.p <= 0.f) {
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) store_f32(o, j, x[j] * inv);
  } else {
    const uint64_t base = dropout_row_base(pl, drop, h, qi) + uint64_t(key0 + lo);
    float mult[kDropoutRun];
    for (int64_t j0 = 0, w = 0; j0 < nk; j0 += w) {
      w = dropout_run(base + uint64_t(j0), nk - j0);
      dropout_multipliers(mult, w, base + uint64_t(j0), drop.rng, drop.p, inv * keep_scale);
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) store_f32(o, j0 + j, x[j0 + j] * mult[j]);
    }
  }
  std::fill(out + lo + nk, out + kv, T(0));
}

}  // namespace

int64_t attention_workspace_floats(const AttentionDims& dims) {
  return workspace_layout(dims).total;
}

namespace {
const float* at(const float* p, int64_t off) { return p ? p + off : nullptr; }

// In bf16 math, x's bf16 elements: x itself when stored in bf16 (a bf16 run's
// saved q, k, v), else its rounding into workspace part `copy`.
const uint16_t* bf16_operand(ReadView x, uint16_t* copy, int64_t n) {
  if (x.bf16) return x.bf16;
  f32_to_bf16(copy, x.f32, n);
  return copy;
}

// The CUDA twins have no sliding window nor document mask yet: refused by
// name, not ignored.
void check_window_on_host(const char* who, const AttentionDims& dims, const void* out) {
  MT_CHECK(dims.window_left < 0 || !MT_ON_DEVICE(out), who, ": --window-size ", dims.window_left,
           ",0 (sliding-window attention) is built for the CPU only, not the CUDA kernels; "
           "fix: run on the CPU, or leave out --window-size");
  MT_CHECK(dims.doc_start == nullptr || !MT_ON_DEVICE(out), who,
           ": --reset-attention-mask (attention within documents) is built for the CPU only, "
           "not the CUDA kernels; fix: run on the CPU, or leave out --reset-attention-mask");
}

void check_views(const char* who, const AttentionDims& dims, std::initializer_list<ReadView> xs) {
  for (const ReadView& x : xs)
    MT_CHECK(x && (x.bf16 == nullptr || dims.math == MathMode::kBF16), who,
             ": null input, or a bf16-stored one in ", math_mode_name(dims.math),
             " math; fix: pass q, k, v (and dctx) in fp32, or bf16 storage in bf16 math");
}
}  // namespace

void attention_forward(float* ctx, float* lse, ReadView q_in, ReadView k_in, ReadView v_in,
                       const AttentionDims& dims, const AttentionDropout& drop, float* workspace) {
  MT_CHECK(ctx && lse && workspace, "attention_forward: null pointer",
           "; fix: pass ctx, lse, q, k, v and a workspace of attention_workspace_floats()");
  check_views("attention_forward", dims, {q_in, k_in, v_in});
  const AttentionPlan pl = make_plan(dims, drop);  // checks the sizes, positions and dropout
  check_window_on_host("attention_forward", dims, ctx);
  if (MT_ON_DEVICE(ctx))
    return cuda::attention_forward(ctx, lse, q_in, k_in, v_in, dims, drop, workspace);
  if (attention_small_applies(dims, drop, attention_workspace_floats(dims)))
    return attention_small_forward(ctx, lse, q_in.f32, k_in.f32, v_in.f32, dims, workspace,
                                   active_isa());
  const float *q = q_in.f32, *k = k_in.f32, *v = v_in.f32;
  const bool dropout = drop.p > 0.f;
  const float keep_scale = dropout ? 1.f / (1.f - drop.p) : 1.f;
  const WorkspaceLayout wl = workspace_layout(dims);
  float* scores = workspace + wl.scores;  // (bh, bq, kv)
  const bool bf16 = pl.math == MathMode::kBF16;
  uint16_t* p16 = nullptr;
  const uint16_t *q16 = nullptr, *k16 = nullptr, *v16 = nullptr;
  if (bf16) {
    p16 = bf16_part(workspace, wl.p16);  // (bh, bq, kv)
    q16 = bf16_operand(q_in, bf16_part(workspace, wl.q16), pl.bh * pl.s * pl.d);
    k16 = bf16_operand(k_in, bf16_part(workspace, wl.k16), pl.bh * pl.sk * pl.d);
    v16 = bf16_operand(v_in, bf16_part(workspace, wl.v16), pl.bh * pl.sk * pl.dv);
  }
  for (int64_t q0 = 0; q0 < pl.s; q0 += pl.block) {
    // The block's keys [k_lo, k_hi): kv of them, k_lo > 0 only with a window or documents.
    const int64_t bq = std::min(pl.block, pl.s - q0), k_lo = pl.first_of_block(q0);
    const int64_t kv = std::max<int64_t>(pl.visible(q0 + bq - 1) - k_lo, 0);
    if (kv == 0) {  // the block sees no key: ctx 0, lse -inf
      for (int64_t h = 0; h < pl.bh; ++h) {
        std::fill_n(ctx + (h * pl.s + q0) * pl.dv, bq * pl.dv, 0.f);
        std::fill_n(lse + h * pl.s + q0, bq, -std::numeric_limits<float>::infinity());
      }
      continue;
    }
    const int64_t ko = k_lo * pl.d;    // of the first key in (bh, sk, d)
    const int64_t vo = k_lo * pl.dv;  // of its value in (bh, sk, dv)
    block_times_keys_t(scores, at(q, q0 * pl.d), at(k, ko), bf16 ? q16 + q0 * pl.d : nullptr,
                       bf16 ? k16 + ko : nullptr, pl, bq, kv, pl.d);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < pl.bh * bq; ++r) {
      const int64_t h = r / bq, qi = q0 + r % bq, lo = pl.first(h / pl.a, qi) - k_lo;
      const int64_t nk = std::max<int64_t>(pl.visible(qi) - k_lo - lo, 0);
      float* row = scores + r * kv;
      float* seen = row + lo;  // the visible keys
      float inv = 0.f;
      if (nk == 0) {
        lse[h * pl.s + qi] = -std::numeric_limits<float>::infinity();
      } else {
        const float shift = row_max(seen, nk) * pl.scale;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < nk; ++j) {
          const float e = exp_f32(seen[j] * pl.scale - shift);
          seen[j] = e;
          sum += e;
        }
        lse[h * pl.s + qi] = shift + std::log(sum);
        inv = 1.f / sum;
      }
      // P = e / sum (and dropout) into the row, or (bf16) into the bf16
      // operand of P·v only; masked keys are 0.
      if (p16)
        normalize_row(p16 + r * kv, row, lo, nk, kv, inv, pl, drop, h, qi, k_lo, keep_scale);
      else
        normalize_row(row, row, lo, nk, kv, inv, pl, drop, h, qi, k_lo, keep_scale);
    }
    probs_times_values(ctx + q0 * pl.dv, scores, at(v, vo), p16, bf16 ? v16 + vo : nullptr, pl, bq,
                       kv, pl.dv);
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q_in,
                        ReadView k_in, ReadView v_in, ReadView ctx_in, const float* lse,
                        const AttentionDims& dims, const AttentionDropout& drop, float* workspace,
                        const float* row_dsum) {
  MT_CHECK(dq && dk && dv && dctx && lse && workspace &&
               (dims.math != MathMode::kF32 || row_dsum || ctx_in.f32 != nullptr),
           "attention_backward: null pointer",
           "; fix: pass every tensor (ctx in fp32 math without row_dsum) and a workspace of "
           "attention_workspace_floats()");
  check_views("attention_backward", dims, {q_in, k_in, v_in});
  const AttentionPlan pl = make_plan(dims, drop);  // checks the sizes, positions and dropout
  check_window_on_host("attention_backward", dims, dq);
  if (MT_ON_DEVICE(dq))
    return cuda::attention_backward(dq, dk, dv, dctx, q_in, k_in, v_in, ctx_in, lse, dims, drop,
                                    workspace, row_dsum);
  if (attention_small_applies(dims, drop, attention_workspace_floats(dims)))
    return attention_small_backward(dq, dk, dv, dctx, q_in.f32, k_in.f32, v_in.f32, ctx_in.f32,
                                    lse, row_dsum, dims, workspace, active_isa());
  const float *q = q_in.f32, *k = k_in.f32, *v = v_in.f32, *ctx = ctx_in.f32;
  const bool dropout = drop.p > 0.f;
  const float keep_scale = dropout ? 1.f / (1.f - drop.p) : 1.f;
  const WorkspaceLayout wl = workspace_layout(dims);
  float* probs = workspace + wl.scores;    // (bh, bq, kv): S, then dropout(P)
  float* dprobs = workspace + wl.dscores;  // (bh, bq, kv): dP, then dS·scale
  const bool bf16 = pl.math == MathMode::kBF16;
  uint16_t *p16 = nullptr, *ds16 = nullptr, *dctx16 = nullptr;
  const uint16_t *q16 = nullptr, *k16 = nullptr, *v16 = nullptr;
  if (bf16) {
    p16 = bf16_part(workspace, wl.p16);    // (bh, bq, kv) each
    ds16 = bf16_part(workspace, wl.ds16);
    const int64_t nq = pl.bh * pl.s * pl.d, nk = pl.bh * pl.sk * pl.d;
    q16 = bf16_operand(q_in, bf16_part(workspace, wl.q16), nq);
    k16 = bf16_operand(k_in, bf16_part(workspace, wl.k16), nk);
    v16 = bf16_operand(v_in, bf16_part(workspace, wl.v16), pl.bh * pl.sk * pl.dv);
    dctx16 = bf16_part(workspace, wl.dctx16);
    f32_to_bf16(dctx16, dctx, pl.bh * pl.s * pl.dv);
  }
  // Last block first: without a window it sees the most keys, so it writes
  // dk, dv [0, kv) with `=` (and zeroes the keys no query sees), the earlier
  // blocks accumulate. With a window or documents the blocks' key ranges
  // slide: dk, dv are zeroed first and every block accumulates.
  const int64_t nblocks = (pl.s + pl.block - 1) / pl.block;
  bool dkv_written = false;
  if (pl.sliding()) {
    std::fill_n(dk, pl.bh * pl.sk * pl.d, 0.f);
    std::fill_n(dv, pl.bh * pl.sk * pl.dv, 0.f);
    dkv_written = true;
  }
  for (int64_t blk = nblocks - 1; blk >= 0; --blk) {
    const int64_t q0 = blk * pl.block;
    const int64_t bq = std::min(pl.block, pl.s - q0), k_lo = pl.first_of_block(q0);
    const int64_t kv = std::max<int64_t>(pl.visible(q0 + bq - 1) - k_lo, 0);
    const int64_t off = q0 * pl.d;    // of the query block in (bh, s, d)
    const int64_t ko = k_lo * pl.d;   // of the block's first key in (bh, sk, d)
    const int64_t cof = q0 * pl.dv;   // of the block's dctx rows in (bh, s, dv)
    const int64_t vo = k_lo * pl.dv;  // of the block's first value in (bh, sk, dv)
    if (!dkv_written) {
      for (int64_t h = 0; h < pl.bh; ++h) {
        std::fill_n(dk + (h * pl.sk + kv) * pl.d, (pl.sk - kv) * pl.d, 0.f);
        std::fill_n(dv + (h * pl.sk + kv) * pl.dv, (pl.sk - kv) * pl.dv, 0.f);
      }
    }
    if (kv == 0) {  // no visible key: no gradient
      for (int64_t h = 0; h < pl.bh; ++h) std::fill_n(dq + (h * pl.s + q0) * pl.d, bq * pl.d, 0.f);
      continue;
    }
    block_times_keys_t(probs, at(q, off), at(k, ko), bf16 ? q16 + off : nullptr,
                       bf16 ? k16 + ko : nullptr, pl, bq, kv, pl.d);  // S
    block_times_keys_t(dprobs, dctx + cof, at(v, vo), bf16 ? dctx16 + cof : nullptr,
                       bf16 ? v16 + vo : nullptr, pl, bq, kv, pl.dv);  // dP = dctx · vᵀ
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < pl.bh * bq; ++r) {
      const int64_t h = r / bq, qi = q0 + r % bq, lo = pl.first(h / pl.a, qi) - k_lo;
      const int64_t nk = std::max<int64_t>(pl.visible(qi) - k_lo - lo, 0);
      // The row's visible entries [lo, lo + nk) of kv.
      float* p_row = probs + r * kv + lo;
      float* dp_row = dprobs + r * kv + lo;
      const float row_lse = lse[h * pl.s + qi];
      const uint64_t base = dropout ? dropout_row_base(pl, drop, h, qi) + uint64_t(k_lo + lo) : 0;
      // Where P and dS·scale go: the bf16 operands, or the fp32 rows in place.
      uint16_t* p_out16 = bf16 ? p16 + r * kv + lo : nullptr;
      uint16_t* ds_out16 = bf16 ? ds16 + r * kv + lo : nullptr;
      const bool own_d = row_dsum == nullptr && pl.math != MathMode::kF32;
      if (nk > 0 && !own_d) {
        // D = dctx_i · ctx_i (= Σ_j P_ij dP_ij after dropout): dv products, not kv
        float dsum = 0.f;
        if (row_dsum) {
          dsum = row_dsum[h * pl.s + qi];
        } else {
          const float* dc = dctx + (h * pl.s + qi) * pl.dv;
          const float* c = ctx + (h * pl.s + qi) * pl.dv;
#pragma omp simd reduction(+ : dsum)
          for (int64_t t = 0; t < pl.dv; ++t) dsum += dc[t] * c[t];
        }
        if (bf16)
          softmax_backward_row(p_row, dp_row, p_out16, ds_out16, nk, row_lse, dsum, pl, drop, base,
                               keep_scale);
        else
          softmax_backward_row(p_row, dp_row, p_row, dp_row, nk, row_lse, dsum, pl, drop, base,
                               keep_scale);
      } else if (nk > 0 && bf16) {  // the results go straight into the matmuls' bf16 operands
        softmax_backward_row_own_d(p_row, dp_row, p_out16, ds_out16, nk, row_lse, pl, drop, base,
                                   keep_scale);
      } else if (nk > 0) {  // fp16: in place, rounded by the matmuls
        softmax_backward_row_own_d(p_row, dp_row, p_row, dp_row, nk, row_lse, pl, drop, base,
                                   keep_scale);
      }
      // The masked entries before lo and from lo + nk are 0.
      if (bf16) {
        std::fill(p_out16 - lo, p_out16, uint16_t(0));
        std::fill(ds_out16 - lo, ds_out16, uint16_t(0));
        std::fill(p_out16 + nk, p_out16 - lo + kv, uint16_t(0));
        std::fill(ds_out16 + nk, ds_out16 - lo + kv, uint16_t(0));
      } else {
        std::fill(p_row - lo, p_row, 0.f);
        std::fill(dp_row - lo, dp_row, 0.f);
        std::fill(p_row + nk, p_row - lo + kv, 0.f);
        std::fill(dp_row + nk, dp_row - lo + kv, 0.f);
      }
    }
    // dv[:, k_lo:k_lo+kv] (+)= dropout(P)ᵀ · dctx_block; dk (+)= (dS·scale)ᵀ · q_block
    probs_t_times_rows(dv + vo, probs, dctx + cof, p16, bf16 ? dctx16 + cof : nullptr, pl, bq, kv,
                       pl.dv, dkv_written);
    probs_t_times_rows(dk + ko, dprobs, at(q, off), ds16, bf16 ? q16 + off : nullptr, pl, bq, kv,
                       pl.d, dkv_written);
    dkv_written = true;
    // dq_block = (dS·scale) · k[:, k_lo:k_lo+kv]
    probs_times_values(dq + off, dprobs, at(k, ko), ds16, bf16 ? k16 + ko : nullptr, pl, bq, kv,
                       pl.d);
  }
}

void attention_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                     int64_t rows, int64_t d) {
  if (MT_ON_DEVICE(ctx)) return cuda::attention_merge(ctx, lse, ctx_block, lse_block, rows, d);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float l0 = lse[r], l1 = lse_block[r];
    if (l1 == -std::numeric_limits<float>::infinity()) continue;  // the block adds nothing
    float* c = ctx + r * d;
    const float* cb = ctx_block + r * d;
    if (l0 == -std::numeric_limits<float>::infinity()) {
      std::copy_n(cb, d, c);
      lse[r] = l1;
      continue;
    }
    const float mx = std::max(l0, l1);
    const float e0 = std::exp(l0 - mx), e1 = std::exp(l1 - mx);
    const float l = mx + std::log(e0 + e1);
    const float w0 = std::exp(l0 - l), w1 = std::exp(l1 - l);
#pragma omp simd
    for (int64_t t = 0; t < d; ++t) c[t] = c[t] * w0 + cb[t] * w1;
    lse[r] = l;
  }
}

void attention_row_dsum(float* dsum, const float* dctx, const float* ctx, int64_t rows,
                        int64_t d) {
  if (MT_ON_DEVICE(dsum)) return cuda::attention_row_dsum(dsum, dctx, ctx, rows, d);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.f;
#pragma omp simd reduction(+ : acc)
    for (int64_t t = 0; t < d; ++t) acc += dctx[r * d + t] * ctx[r * d + t];
    dsum[r] = acc;
  }
}

}  // namespace mt
