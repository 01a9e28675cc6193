// Small-head causal attention, a head per thread (see attention_small.h).
//
// Every product is one micro-kernel: C (rows, 2W) = Σ_p A(r, p) · B(p, 0:2W)
// with A read by broadcasts (row-major, or transposed: A(r, p) = a[p·lda + r])
// and B by vector loads along its rows, kRows x 2 registers of accumulators
// (W floats a register). The head's q, k, v, dctx are first copied into
// zero-padded scratch, k and v also transposed (dp, sp), so that
//   S = q · kᵀ, dP = dctx · vᵀ  (B = kᵀ, vᵀ),     ctx = P · v, dq = dS · k,
//   dv = Pᵀ · dctx, dk = dSᵀ · q  (A transposed: the columns of P, dS)
// are all that kernel, each row tile stopped at the causal edge: S and dP
// only up to the tile's last query's key, P · v and dS · k only over the keys
// a tile's queries see, Pᵀ and dSᵀ only over the queries a tile's keys are
// seen by. Rows and columns are padded to multiples of kPad, which every
// path's tile divides, so the kernels have no tails.
#include "kernels/attention_small.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/vec_math.h"

namespace mt {
namespace {

constexpr int64_t kPad = 32;  // floats; a multiple of every path's tile (2W columns, kRows rows)
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Path lanes: V holds kW floats; a tile is kRows x 2 registers.
struct Avx512Lanes {
  typedef float V __attribute__((vector_size(64), aligned(4), may_alias));
  typedef int32_t VI __attribute__((vector_size(64)));
  static constexpr int kW = 16, kRows = 8;
};
struct Avx2Lanes {
  typedef float V __attribute__((vector_size(32), aligned(4), may_alias));
  typedef int32_t VI __attribute__((vector_size(32)));
  static constexpr int kW = 8, kRows = 4;
};
struct ScalarLanes {
  typedef float V;
  typedef int32_t VI;
  static constexpr int kW = 1, kRows = 4;
};

// exp_f32 (vec_math.h) on a register of lanes, the same steps lane by lane:
// GCC leaves exp_f32 in the short masked row loops below scalar.
template <class L>
inline typename L::V exp_lanes(typename L::V x) {
  using V = typename L::V;
  if constexpr (L::kW == 1) {
    return exp_f32(x);
  } else {
    using VI = typename L::VI;
    const V lo = V{} - 104.f, hi = V{} + 89.f;
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    const V n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
    V r = x - n * 0.693145751953125f;
    r = r - n * 1.42860676533018708e-06f;
    V p = V{} + 1.f / 5040.f;
    p = p * r + 1.f / 720.f;
    p = p * r + 1.f / 120.f;
    p = p * r + 1.f / 24.f;
    p = p * r + 1.f / 6.f;
    p = p * r + 0.5f;
    p = p * r + 1.f;
    p = p * r + 1.f;
    const VI ni = __builtin_convertvector(n, VI);
    const VI n1 = ni / 2, n2 = ni - n1;
    return p * (V)((n1 + 127) << 23) * (V)((n2 + 127) << 23);  // bits as floats
  }
}

// keep[t] = whether lane t of the register at j0 is a visible key (< nk), as
// a lane mask (all ones or zero); scalar: a bool.
template <class L>
inline auto visible_lanes(int64_t j0, int64_t nk) {
  if constexpr (L::kW == 1) {
    return j0 < nk;
  } else {
    typename L::VI lane;
    for (int t = 0; t < L::kW; ++t) lane[t] = t;
    return (lane + int32_t(j0)) < int32_t(nk);
  }
}

// The largest and the sum of a register's lanes: folded in halves (each
// step combines the register with itself rotated by H lanes), log2(W) steps.
template <class L, int H, class Op>
inline typename L::V fold_step(typename L::V v, Op op) {
  typename L::VI rotate{};
#pragma GCC unroll 16
  for (int p = 0; p < L::kW; ++p) rotate[p] = (p + H) % L::kW;
  v = op(v, __builtin_shuffle(v, rotate));
  if constexpr (H > 1) v = fold_step<L, H / 2>(v, op);
  return v;
}
template <class L, class Op>
inline float fold_lanes(typename L::V v, Op op) {
  if constexpr (L::kW == 1)
    return v;
  else
    return fold_step<L, L::kW / 2>(v, op)[0];
}
template <class L>
inline float lanes_max(typename L::V v) {
  return fold_lanes<L>(v, [](auto x, auto y) { return x > y ? x : y; });
}
template <class L>
inline float lanes_sum(typename L::V v) {
  return fold_lanes<L>(v, [](auto x, auto y) { return x + y; });
}

struct Sizes {
  int64_t s = 0, d = 0, sp = 0, dp = 0;  // sequence, head size, both padded to kPad
  float scale = 0.f;                     // 1 / sqrt(d)
};

Sizes sizes_of(const AttentionDims& dims) {
  Sizes z;
  z.s = dims.s;
  z.d = dims.d;
  z.sp = round_up(dims.s, kPad);
  z.dp = round_up(dims.d, kPad);
  z.scale = 1.f / std::sqrt(float(dims.d));
  return z;
}

// Backward's scratch (forward needs less): q, dctx, k (sp, dp), kᵀ, vᵀ (dp, sp),
// P, dS (sp, sp), one gradient (sp, dp); rounded to 64 bytes.
// Plus 16 floats to start each thread's part on 64 bytes (thread_scratch).
int64_t thread_floats(const Sizes& z) {
  return round_up(6 * z.sp * z.dp + 2 * z.sp * z.sp, 16) + 16;
}

// Thread t's scratch, on 64 bytes: every padded row then starts on a whole
// register, and the vectorised row loops run no scalar alignment prologue
// (up to 15 scalar exps a row otherwise).
float* thread_scratch(float* workspace, int64_t per_thread) {
  const auto at = reinterpret_cast<uintptr_t>(workspace + omp_get_thread_num() * per_thread);
  return reinterpret_cast<float*>((at + 63) / 64 * 64);
}

// c (kRows, 2W) = Σ_{p in [p0, p1)} A(r, p) · b(p, 0:2W)         [=]
// A(r, p) = a[r·lda + p], or a[p·lda + r] when kTransA.
template <class L, bool kTransA>
inline void tile(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb,
                 int64_t p0, int64_t p1) {
  using V = typename L::V;
  constexpr int R = L::kRows, W = L::kW;
  V acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = V{};
  for (int64_t p = p0; p < p1; ++p) {
    const V b0 = *reinterpret_cast<const V*>(b + p * ldb);
    const V b1 = *reinterpret_cast<const V*>(b + p * ldb + W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float x = kTransA ? a[p * lda + r] : a[r * lda + p];
      acc0[r] += x * b0;
      acc1[r] += x * b1;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    *reinterpret_cast<V*>(c + r * ldc) = acc0[r];
    *reinterpret_cast<V*>(c + r * ldc + W) = acc1[r];
  }
}

// c rows [0, m) (tiles of kRows) x columns [0, cols(i0)) (panels of 2W) of
// A · B, the tile at row i0 summing p over range(i0).                  [=]
template <class L, bool kTransA, class Cols, class Range>
inline void product(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb,
                    int64_t m, Cols cols, Range range) {
  constexpr int64_t R = L::kRows, W2 = 2 * L::kW;
  for (int64_t i0 = 0; i0 < m; i0 += R) {
    const std::pair<int64_t, int64_t> pr = range(i0);
    const int64_t n = cols(i0);
    const float* at = kTransA ? a + i0 : a + i0 * lda;
    for (int64_t c0 = 0; c0 < n; c0 += W2)
      tile<L, kTransA>(c + i0 * ldc + c0, ldc, at, lda, b + c0, ldb, pr.first, pr.second);
  }
}

// dst (sp, dp) = x (s, d) zero-padded. Plain loops, not memcpy: rows of a
// few dozen floats, where a library call per row costs more than the copy.
inline void pad_copy(float* dst, const float* x, const Sizes& z) {
  for (int64_t i = 0; i < z.s; ++i) {
    float* o = dst + i * z.dp;
    const float* in = x + i * z.d;
#pragma omp simd
    for (int64_t t = 0; t < z.dp; ++t) o[t] = t < z.d ? in[t] : 0.f;
  }
  std::fill(dst + z.s * z.dp, dst + z.sp * z.dp, 0.f);
}

// out (s, d) = the first d columns of src (s, dp).
inline void unpad_copy(float* out, const float* src, const Sizes& z) {
  for (int64_t i = 0; i < z.s; ++i) {
    float* o = out + i * z.d;
    const float* in = src + i * z.dp;
#pragma omp simd
    for (int64_t t = 0; t < z.d; ++t) o[t] = in[t];
  }
}

// A W x W block (r: its W rows) transposed in registers, step H after step:
// for each pair of rows (i, i + H), in each run of 2H lanes, row i takes the
// first H lanes of itself then of row i + H, and row i + H the last H of
// each. Steps H = W/2, ..., 1 transpose the block (the first swaps its
// quarters, each next one the quarters of the quarters).
template <class L, int H>
inline void transpose_steps(typename L::V* r) {
  typename L::VI lo{}, hi{};
#pragma GCC unroll 16
  for (int p = 0; p < L::kW; ++p) {
    const int run = p / (2 * H) * (2 * H), off = p % (2 * H);
    lo[p] = off < H ? run + off : L::kW + run + off - H;
    hi[p] = off < H ? run + H + off : L::kW + run + off;
  }
#pragma GCC unroll 16
  for (int i = 0; i < L::kW; ++i)
    if ((i & H) == 0) {
      const typename L::V a = __builtin_shuffle(r[i], r[i + H], lo);
      r[i + H] = __builtin_shuffle(r[i], r[i + H], hi);
      r[i] = a;
    }
  if constexpr (H > 1) transpose_steps<L, H / 2>(r);
}

// dst (d, sp) = xᵀ, x (s, d); keys [s, sp) zero. Whole W x W blocks in
// registers, the rest (d or s not a multiple of W, the scalar path) a float
// at a time.
template <class L>
inline void pad_transpose(float* dst, const float* x, const Sizes& z) {
  using V = typename L::V;
  constexpr int W = L::kW;
  const int64_t s_blocks = W > 1 ? z.s / W * W : 0, d_blocks = W > 1 ? z.d / W * W : 0;
  if constexpr (W > 1) {
    for (int64_t t0 = 0; t0 < d_blocks; t0 += W)
      for (int64_t j0 = 0; j0 < s_blocks; j0 += W) {
        V r[W];
        for (int i = 0; i < W; ++i) r[i] = *reinterpret_cast<const V*>(x + (j0 + i) * z.d + t0);
        transpose_steps<L, W / 2>(r);
        for (int i = 0; i < W; ++i) *reinterpret_cast<V*>(dst + (t0 + i) * z.sp + j0) = r[i];
      }
  }
  for (int64_t t = 0; t < z.d; ++t) {
    float* row = dst + t * z.sp;
    for (int64_t j = t < d_blocks ? s_blocks : 0; j < z.s; ++j) row[j] = x[j * z.d + t];
    std::fill(row + z.s, row + z.sp, 0.f);
  }
}

// One head's tensors: q, k, v, ctx, dctx, dq, dk, dv (s, d); lse, row_dsum (s).
struct Head {
  const float *q = nullptr, *k = nullptr, *v = nullptr, *ctx = nullptr, *dctx = nullptr;
  const float* row_dsum = nullptr;
  float *out = nullptr, *lse = nullptr;  // forward: ctx, lse
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
  const float* lse_in = nullptr;  // backward
  float* scratch = nullptr;       // thread_floats(z)
};

// Columns of S (and dP) the row tile at i0 computes: its last query's keys,
// in whole panels and whole 16-float groups (the row passes' unit).
template <class L>
inline int64_t causal_cols(const Sizes& z, int64_t i0) {
  return std::min(z.sp, round_up(i0 + L::kRows, std::max(16, 2 * L::kW)));
}

template <class L>
inline void forward_head(const Head& hd, const Sizes& z) {
  constexpr int64_t R = L::kRows;
  const int64_t s = z.s, d = z.d, sp = z.sp, dp = z.dp;
  float* qs = hd.scratch;    // (sp, dp)
  float* kt = qs + sp * dp;  // (dp, sp)
  float* vs = kt + dp * sp;  // (sp, dp)
  float* sc = vs + sp * dp;  // (sp, sp): S, then P
  float* o = sc + sp * sp;   // (sp, dp)
  pad_copy(qs, hd.q, z);
  pad_transpose<L>(kt, hd.k, z);
  pad_copy(vs, hd.v, z);
  product<L, false>(
      sc, sp, qs, dp, kt, sp, s, [&](int64_t i0) { return causal_cols<L>(z, i0); },
      [&](int64_t) { return std::pair<int64_t, int64_t>(0, d); });
  using V = typename L::V;
  constexpr int W = L::kW;
  const V ninf = V{} - INFINITY, zero = V{};
  for (int64_t i = 0; i < s; ++i) {
    // The row's keys [0, i], in whole registers over [0, nv), the masked
    // lanes -inf (e = 0). The S product computed those columns (causal_cols).
    float* row = sc + i * sp;
    const int64_t nk = i + 1, nv = round_up(nk, 16);
    V vmax = ninf;
    for (int64_t j0 = 0; j0 < nv; j0 += W) {
      const V x = *reinterpret_cast<const V*>(row + j0);
      const V seen = visible_lanes<L>(j0, nk) ? x : ninf;
      vmax = vmax > seen ? vmax : seen;
    }
    const float shift = lanes_max<L>(vmax) * z.scale;
    V vsum = zero;
    for (int64_t j0 = 0; j0 < nv; j0 += W) {
      V* x = reinterpret_cast<V*>(row + j0);
      // min: a masked lane's score may exceed the row's max (no overflow);
      // a visible lane's argument is <= 0 already.
      V arg = *x * z.scale - shift;
      arg = arg < zero ? arg : zero;
      const V e = visible_lanes<L>(j0, nk) ? exp_lanes<L>(arg) : zero;
      *x = e;
      vsum += e;
    }
    const float sum = lanes_sum<L>(vsum);
    hd.lse[i] = shift + std::log(sum);
    const float inv = 1.f / sum;
    for (int64_t j0 = 0; j0 < nv; j0 += W) {
      V* x = reinterpret_cast<V*>(row + j0);
      *x = *x * inv;
    }
    std::fill(row + nv, row + sp, 0.f);
  }
  product<L, false>(
      o, dp, sc, sp, vs, dp, s, [&](int64_t) { return dp; },
      [&](int64_t i0) { return std::pair<int64_t, int64_t>(0, std::min(s, i0 + R)); });
  unpad_copy(hd.out, o, z);
}

template <class L>
inline void backward_head(const Head& hd, const Sizes& z) {
  constexpr int64_t R = L::kRows;
  const int64_t s = z.s, d = z.d, sp = z.sp, dp = z.dp;
  float* qs = hd.scratch;     // (sp, dp)
  float* dos = qs + sp * dp;  // (sp, dp)
  float* ks = dos + sp * dp;  // (sp, dp)
  float* kt = ks + sp * dp;   // (dp, sp)
  float* vt = kt + dp * sp;   // (dp, sp)
  float* p = vt + dp * sp;    // (sp, sp): S, then P
  float* ds = p + sp * sp;    // (sp, sp): dP, then dS·scale
  float* g = ds + sp * sp;    // (sp, dp): dv, dk, dq in turn
  pad_copy(qs, hd.q, z);
  pad_copy(dos, hd.dctx, z);
  pad_copy(ks, hd.k, z);
  pad_transpose<L>(kt, hd.k, z);
  pad_transpose<L>(vt, hd.v, z);
  auto cols = [&](int64_t i0) { return causal_cols<L>(z, i0); };
  auto head_size = [&](int64_t) { return std::pair<int64_t, int64_t>(0, d); };
  product<L, false>(p, sp, qs, dp, kt, sp, s, cols, head_size);    // S
  product<L, false>(ds, sp, dos, dp, vt, sp, s, cols, head_size);  // dP = dctx · vᵀ
  using V = typename L::V;
  constexpr int W = L::kW;
  const V zero = V{};
  for (int64_t i = 0; i < s; ++i) {
    float dsum = 0.f;  // D = dctx_i · ctx_i
    if (hd.row_dsum) {
      dsum = hd.row_dsum[i];
    } else {
      const float* dc = hd.dctx + i * d;
      const float* c = hd.ctx + i * d;
#pragma omp simd reduction(+ : dsum)
      for (int64_t t = 0; t < d; ++t) dsum += dc[t] * c[t];
    }
    float* p_row = p + i * sp;
    float* ds_row = ds + i * sp;
    const float row_lse = hd.lse_in[i];
    const int64_t nk = i + 1, nv = round_up(nk, 16);  // as forward's row pass
    for (int64_t j0 = 0; j0 < nv; j0 += W) {
      V* pv = reinterpret_cast<V*>(p_row + j0);
      V* dsv = reinterpret_cast<V*>(ds_row + j0);
      V arg = *pv * z.scale - row_lse;
      arg = arg < zero ? arg : zero;
      const V pr = visible_lanes<L>(j0, nk) ? exp_lanes<L>(arg) : zero;
      *dsv = z.scale * pr * (*dsv - dsum);
      *pv = pr;
    }
    std::fill(p_row + nv, p_row + sp, 0.f);
    std::fill(ds_row + nv, ds_row + sp, 0.f);
  }
  auto all = [&](int64_t) { return dp; };
  auto seen_by = [&](int64_t j0) { return std::pair<int64_t, int64_t>(j0, s); };  // queries >= key
  auto sees = [&](int64_t i0) { return std::pair<int64_t, int64_t>(0, std::min(s, i0 + R)); };
  product<L, true>(g, dp, p, sp, dos, dp, s, all, seen_by);  // dv = Pᵀ · dctx
  unpad_copy(hd.dv, g, z);
  product<L, true>(g, dp, ds, sp, qs, dp, s, all, seen_by);  // dk = dSᵀ · q
  unpad_copy(hd.dk, g, z);
  product<L, false>(g, dp, ds, sp, ks, dp, s, all, sees);  // dq = dS · k
  unpad_copy(hd.dq, g, z);
}

// A head on each path, compiled for its instruction set (flatten: the
// templates above inline into it).
MT_TARGET_AVX512 __attribute__((flatten, noinline)) void forward_avx512(const Head& h,
                                                                        const Sizes& z) {
  forward_head<Avx512Lanes>(h, z);
}
MT_TARGET_AVX2 __attribute__((flatten, noinline)) void forward_avx2(const Head& h, const Sizes& z) {
  forward_head<Avx2Lanes>(h, z);
}
__attribute__((noinline)) void forward_scalar(const Head& h, const Sizes& z) {
  forward_head<ScalarLanes>(h, z);
}
MT_TARGET_AVX512 __attribute__((flatten, noinline)) void backward_avx512(const Head& h,
                                                                         const Sizes& z) {
  backward_head<Avx512Lanes>(h, z);
}
MT_TARGET_AVX2 __attribute__((flatten, noinline)) void backward_avx2(const Head& h,
                                                                     const Sizes& z) {
  backward_head<Avx2Lanes>(h, z);
}
__attribute__((noinline)) void backward_scalar(const Head& h, const Sizes& z) {
  backward_head<ScalarLanes>(h, z);
}

}  // namespace

int64_t attention_small_thread_floats(const AttentionDims& dims) {
  return thread_floats(sizes_of(dims));
}

bool attention_small_applies(const AttentionDims& dims, const AttentionDropout& drop,
                             int64_t workspace_floats) {
  const bool shape = dims.math == MathMode::kF32 && drop.p <= 0.f &&
                     (dims.sk == 0 || dims.sk == dims.s) && dims.q_pos0 == 0 && dims.k_pos0 == 0 &&
                     (dims.s_global == 0 || dims.s_global == dims.s) && dims.window_left < 0 &&
                     dims.doc_start == nullptr && (dims.dv == 0 || dims.dv == dims.d) &&
                     dims.d <= 128 && dims.s <= 512;
  return shape && active_isa() != Isa::kScalar &&
         int64_t(omp_get_max_threads()) * attention_small_thread_floats(dims) <= workspace_floats;
}

void attention_small_forward(float* ctx, float* lse, const float* q, const float* k, const float* v,
                             const AttentionDims& dims, float* workspace, Isa isa) {
  const Sizes z = sizes_of(dims);
  const int64_t per_thread = thread_floats(z), bh = dims.b * dims.a, n = z.s * z.d;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < bh; ++h) {
    Head hd;
    hd.q = q + h * n;
    hd.k = k + h * n;
    hd.v = v + h * n;
    hd.out = ctx + h * n;
    hd.lse = lse + h * z.s;
    hd.scratch = thread_scratch(workspace, per_thread);
    if (isa == Isa::kAvx512)
      forward_avx512(hd, z);
    else if (isa == Isa::kAvx2)
      forward_avx2(hd, z);
    else
      forward_scalar(hd, z);
  }
}

void attention_small_backward(float* dq, float* dk, float* dv, const float* dctx, const float* q,
                              const float* k, const float* v, const float* ctx, const float* lse,
                              const float* row_dsum, const AttentionDims& dims, float* workspace,
                              Isa isa) {
  const Sizes z = sizes_of(dims);
  const int64_t per_thread = thread_floats(z), bh = dims.b * dims.a, n = z.s * z.d;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < bh; ++h) {
    Head hd;
    hd.q = q + h * n;
    hd.k = k + h * n;
    hd.v = v + h * n;
    hd.ctx = ctx ? ctx + h * n : nullptr;
    hd.dctx = dctx + h * n;
    hd.row_dsum = row_dsum ? row_dsum + h * z.s : nullptr;
    hd.lse_in = lse + h * z.s;
    hd.dq = dq + h * n;
    hd.dk = dk + h * n;
    hd.dv = dv + h * n;
    hd.scratch = thread_scratch(workspace, per_thread);
    if (isa == Isa::kAvx512)
      backward_avx512(hd, z);
    else if (isa == Isa::kAvx2)
      backward_avx2(hd, z);
    else
      backward_scalar(hd, z);
  }
}

}  // namespace mt
