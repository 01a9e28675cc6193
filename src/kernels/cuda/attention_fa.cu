// FlashAttention-2 style attention in bf16 math (see attention_fa.h), on
// mma.sync m16n8k16 (attention_fa.cuh has the fragment layouts).
//
// A block has 4 warps; a warp owns 16 rows (queries; keys in dk/dv) of the
// block's 64 and streams tiles of 64 (keys; queries) through shared memory as
// bf16, double-buffered (cp.async for bf16 storage). Every product lands in
// registers: a lane holds rows g and g + 8 of its warp's strip, columns
// 8j + 2t, +1 of every n8 tile j, so the softmax, masking and dropout run on
// the accumulators, and P (dS) becomes the A operand of the next product
// without leaving registers.
//   forward: S = q kᵀ, online softmax in fp32 (base-2 exponent), P rounded
//     to bf16 before P·v (unnormalised, as attention_tc), O / l at the end;
//     rows that see no key get ctx 0 and lse -inf.
//   backward: (0) without row_dsum, a pre-pass per query tile stores the
//     row's own D = Σ_j P_j m_j dP_j (fa_rows_kernel<D, true>); (1) dq per
//     query tile: dS = scale·P·(m·dP - D) rounded to bf16, dq = dS·k
//     (fa_rows_kernel<D, false>); (2) dk, dv per key tile over its query
//     tiles: dv = (m·P)ᵀ·dctx, dk = dSᵀ·q. No atomics: every output element
//     is written once, by one lane.
// The dropout mask of a (64, 64) tile pair is computed once per tile into
// shared memory (one 32-key word per thread, attention_tc's keep rule).
#include "kernels/cuda/attention_fa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "kernels/cuda/attention_fa.cuh"

namespace mt::cuda {
namespace {
using namespace fa;

// Bytes of shared memory: bf16 tiles (kTile, D + 8), then the keep words
// (kThreads) and, in dk/dv, two stages of lse and D (kTile floats each).
template <int D>
constexpr size_t tile_bytes() { return size_t(kTile) * (D + 8) * 2; }
template <int D>
constexpr size_t forward_shared() { return 5 * tile_bytes<D>() + kThreads * 4; }  // q, 2 k, 2 v
template <int D>
constexpr size_t rows_shared() { return 6 * tile_bytes<D>() + kThreads * 4; }  // q, dO, 2 k, 2 v
template <int D>
constexpr size_t dkdv_shared() {  // k, v, 2 q, 2 dO; 2 lse, 2 D
  return 6 * tile_bytes<D>() + kThreads * 4 + 4 * kTile * 4;
}

// Is any / every (row, col) of the warp's rows [r0, r0 + 16) visible
// (rows are the first index of TileMask::visible)?
__device__ __forceinline__ bool rows_any(const TileMask& tm, int r0) {
  return r0 < tm.q_lim && tm.k_lim > 0 && min(r0 + 15, tm.q_lim - 1) + tm.diff >= 0;
}
__device__ __forceinline__ bool rows_all(const TileMask& tm, int r0) {
  return r0 + 16 <= tm.q_lim && tm.k_lim == kTile && r0 + tm.diff >= kTile - 1;
}

// ---------------------------------------------------------------- forward

// ctx, lse [=] of one (query tile, head); grid: n_tiles · bh blocks, the last
// (heaviest) query tiles first.
template <int D>
__global__ void __launch_bounds__(kThreads)
    fa_forward_kernel(float* ctx, float* lse, Operand q, Operand k, Operand v, Args g,
                      int64_t n_tiles, int64_t bh) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kLd = D + 8, kT = kTile * kLd;
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + kT;      // two stages
  bf16* Vs = Ks + 2 * kT;  // two stages
  uint32_t* keep = reinterpret_cast<uint32_t*>(Vs + 2 * kT);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int r0 = warp * 16;  // the warp's first row in the tile
  const int64_t tile = n_tiles - 1 - int64_t(blockIdx.x) / bh;
  const int64_t h = int64_t(blockIdx.x) % bh;
  const int64_t q0 = tile * kTile;
  const int64_t q_off = h * g.s * D, k_off = h * g.sk * D;
  const int64_t q_last = (q0 + kTile < g.s ? q0 + kTile : g.s) - 1;
  const int n_kt = int((attn::visible(g, q_last) + kTile - 1) / kTile);  // key tiles seen

  load_tile<D>(Qs, q, q_off, q0, g.s);
  if (n_kt > 0) {
    load_tile<D>(Ks, k, k_off, 0, g.sk);
    load_tile<D>(Vs, v, k_off, 0, g.sk);
  }
  cp_async_commit();

  const float sl2 = g.scale * kLog2e;
  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g, g + 8: max (log2), sum

  for (int it = 0; it < n_kt; ++it) {
    const int64_t kt = int64_t(it) * kTile;
    const int buf = it & 1;
    if (it + 1 < n_kt) {
      load_tile<D>(Ks + (buf ^ 1) * kT, k, k_off, kt + kTile, g.sk);
      load_tile<D>(Vs + (buf ^ 1) * kT, v, k_off, kt + kTile, g.sk);
    }
    cp_async_commit();  // possibly empty: the wait below stays uniform
    if (g.dropout) keep_words(keep, g, h, q0, kt);
    cp_async_wait<1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) load_a(qf[ks], Qs + r0 * kLd, kLd, 16 * ks, lane);
    }
    const TileMask tm = tile_mask(g, q0, kt);
    if (rows_any(tm, r0)) {  // warp-uniform
      const bf16* Kb = Ks + buf * kT;
      const bf16* Vb = Vs + buf * kT;
      float s[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          uint32_t b[4];
          load_b_nk(b, Kb, kLd, 16 * jj, 16 * ks, lane);
          mma(s[2 * jj], qf[ks], b[0], b[1]);
          mma(s[2 * jj + 1], qf[ks], b[2], b[3]);
        }
      if (!rows_all(tm, r0)) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (!tm.visible(r0 + gq + 8 * (e >> 1), 8 * j + 2 * tq + (e & 1))) s[j][e] = -INFINITY;
      }
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
      float base[2], corr[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], 1));
        mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], 2));
        const float m_new = fmaxf(m[u], mx[u] * sl2);  // sl2 > 0: max commutes
        base[u] = m_new == -INFINITY ? 0.f : m_new;     // no key yet: every p is 0
        corr[u] = exp2f(m[u] - base[u]);                // 0 while m is -inf
        m[u] = m_new;
      }
      uint32_t kw[2][2] = {{0u, 0u}, {0u, 0u}};
      if (g.dropout) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          kw[u][0] = keep[2 * (r0 + gq + 8 * u)];
          kw[u][1] = keep[2 * (r0 + gq + 8 * u) + 1];
        }
      }
      float sum[2] = {0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int u = e >> 1, c = 8 * j + 2 * tq + (e & 1);
          float p = exp2f(fmaf(s[j][e], sl2, -base[u]));  // masked (-inf): 0
          sum[u] += p;
          if (g.dropout) p *= (kw[u][c >> 5] >> (c & 31)) & 1u ? g.keep_scale : 0.f;
          s[j][e] = p;
        }
#pragma unroll
      for (int u = 0; u < 2; ++u) l[u] = l[u] * corr[u] + sum[u];
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= corr[0];
        o[n][1] *= corr[0];
        o[n][2] *= corr[1];
        o[n][3] *= corr[1];
      }
      // O += P (16, 64 keys) · V (64 keys, D)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t a[4];
        acc_to_a(a, s, kk);
#pragma unroll
        for (int dd = 0; dd < D / 16; ++dd) {
          uint32_t b[4];
          load_b_kn(b, Vb, kLd, 16 * kk, 16 * dd, lane);
          mma(o[2 * dd], a, b[0], b[1]);
          mma(o[2 * dd + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this stage's K, V and the keep words are consumed
  }
  cp_async_wait<0>();  // (no key tile: the q copies are still in flight)

#pragma unroll
  for (int u = 0; u < 2; ++u) {
    l[u] += __shfl_xor_sync(0xffffffffu, l[u], 1);
    l[u] += __shfl_xor_sync(0xffffffffu, l[u], 2);
    const int64_t qi = q0 + r0 + gq + 8 * u;
    if (qi >= g.s) continue;
    const float inv = l[u] > 0.f ? 1.f / l[u] : 0.f;  // a row that sees no key: ctx 0
    float* out = ctx + q_off + qi * D + 2 * tq;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<float2*>(out + 8 * n) =
          make_float2(o[n][2 * u] * inv, o[n][2 * u + 1] * inv);
    if (tq == 0) lse[h * g.s + qi] = l[u] > 0.f ? (m[u] + log2f(l[u])) * kLn2 : -INFINITY;
  }
}

// ---------------------------------------------------------------- backward

// One (query tile, head), the heaviest tiles first, streaming the key tiles.
// DSUM: dsum [=] the rows' own D = Σ_j P_j m_j dP_j (the pre-pass); else
// dq [=] with D read from dsum.
template <int D, bool DSUM>
__global__ void __launch_bounds__(kThreads)
    fa_rows_kernel(float* dq, float* dsum, const float* dctx, Operand q, Operand k, Operand v,
                   const float* lse, Args g, int64_t n_tiles, int64_t bh) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kLd = D + 8, kT = kTile * kLd;
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* dOs = Qs + kT;
  bf16* Ks = dOs + kT;     // two stages
  bf16* Vs = Ks + 2 * kT;  // two stages
  uint32_t* keep = reinterpret_cast<uint32_t*>(Vs + 2 * kT);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int r0 = warp * 16;
  const int64_t tile = n_tiles - 1 - int64_t(blockIdx.x) / bh;
  const int64_t h = int64_t(blockIdx.x) % bh;
  const int64_t q0 = tile * kTile;
  const int64_t q_off = h * g.s * D, k_off = h * g.sk * D;
  const int64_t q_last = (q0 + kTile < g.s ? q0 + kTile : g.s) - 1;
  const int n_kt = int((attn::visible(g, q_last) + kTile - 1) / kTile);

  load_tile<D>(Qs, q, q_off, q0, g.s);
  load_tile<D>(dOs, Operand{dctx, nullptr}, q_off, q0, g.s);
  if (n_kt > 0) {
    load_tile<D>(Ks, k, k_off, 0, g.sk);
    load_tile<D>(Vs, v, k_off, 0, g.sk);
  }
  cp_async_commit();

  const float sl2 = g.scale * kLog2e;
  float lse2[2], Drow[2], part[2] = {0.f, 0.f};
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t qi = q0 + r0 + gq + 8 * u;
    const bool seen = qi < g.s && attn::visible(g, qi) > 0;
    lse2[u] = seen ? lse[h * g.s + qi] * kLog2e : 0.f;
    Drow[u] = !DSUM && seen ? dsum[h * g.s + qi] : 0.f;
  }
  float acc[DSUM ? 1 : D / 8][4];
#pragma unroll
  for (int n = 0; n < (DSUM ? 1 : D / 8); ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int it = 0; it < n_kt; ++it) {
    const int64_t kt = int64_t(it) * kTile;
    const int buf = it & 1;
    if (it + 1 < n_kt) {
      load_tile<D>(Ks + (buf ^ 1) * kT, k, k_off, kt + kTile, g.sk);
      load_tile<D>(Vs + (buf ^ 1) * kT, v, k_off, kt + kTile, g.sk);
    }
    cp_async_commit();
    if (g.dropout) keep_words(keep, g, h, q0, kt);
    cp_async_wait<1>();
    __syncthreads();
    const TileMask tm = tile_mask(g, q0, kt);
    if (rows_any(tm, r0)) {
      const bf16* Kb = Ks + buf * kT;
      const bf16* Vb = Vs + buf * kT;
      float s[8][4], dp[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t aq[4], ado[4];
        load_a(aq, Qs + r0 * kLd, kLd, 16 * ks, lane);
        load_a(ado, dOs + r0 * kLd, kLd, 16 * ks, lane);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          uint32_t b[4];
          load_b_nk(b, Kb, kLd, 16 * jj, 16 * ks, lane);  // S = Q Kᵀ
          mma(s[2 * jj], aq, b[0], b[1]);
          mma(s[2 * jj + 1], aq, b[2], b[3]);
          load_b_nk(b, Vb, kLd, 16 * jj, 16 * ks, lane);  // dP = dO Vᵀ
          mma(dp[2 * jj], ado, b[0], b[1]);
          mma(dp[2 * jj + 1], ado, b[2], b[3]);
        }
      }
      const bool all = rows_all(tm, r0);
      uint32_t kw[2][2] = {{0u, 0u}, {0u, 0u}};
      if (g.dropout) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          kw[u][0] = keep[2 * (r0 + gq + 8 * u)];
          kw[u][1] = keep[2 * (r0 + gq + 8 * u) + 1];
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int u = e >> 1, c = 8 * j + 2 * tq + (e & 1);
          const bool vis = all || tm.visible(r0 + gq + 8 * u, c);
          const float p = exp2f(fmaf(s[j][e], sl2, -lse2[u]));
          const float mult =
              g.dropout ? ((kw[u][c >> 5] >> (c & 31)) & 1u ? g.keep_scale : 0.f) : 1.f;
          if (DSUM) {
            if (vis) part[u] = fmaf(p, dp[j][e] * mult, part[u]);
          } else {
            dp[j][e] = vis ? g.scale * p * (dp[j][e] * mult - Drow[u]) : 0.f;  // dS
          }
        }
      if constexpr (!DSUM) {
        // dq += dS (16, 64 keys) · K (64 keys, D)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          uint32_t a[4];
          acc_to_a(a, dp, kk);
#pragma unroll
          for (int dd = 0; dd < D / 16; ++dd) {
            uint32_t b[4];
            load_b_kn(b, Kb, kLd, 16 * kk, 16 * dd, lane);
            mma(acc[2 * dd], a, b[0], b[1]);
            mma(acc[2 * dd + 1], a, b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

#pragma unroll
  for (int u = 0; u < 2; ++u) {
    if (DSUM) {
      part[u] += __shfl_xor_sync(0xffffffffu, part[u], 1);
      part[u] += __shfl_xor_sync(0xffffffffu, part[u], 2);
    }
    const int64_t qi = q0 + r0 + gq + 8 * u;
    if (qi >= g.s) continue;
    if constexpr (DSUM) {
      if (tq == 0) dsum[h * g.s + qi] = part[u];
    } else {
      float* out = dq + q_off + qi * D + 2 * tq;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2*>(out + 8 * n) = make_float2(acc[n][2 * u], acc[n][2 * u + 1]);
    }
  }
}

// dk, dv [=] of one (key tile, head), the first (most seen) key tiles first,
// streaming the query tiles that see it. A warp owns 16 keys; its products
// (16 keys, kQN queries) go kQN queries of the tile at a time (d = 128: 32,
// to stay in registers). Keys no query sees get 0.
template <int D>
__global__ void __launch_bounds__(kThreads)
    fa_dkdv_kernel(float* dk, float* dv, const float* dctx, Operand q, Operand k, Operand v,
                   const float* lse, const float* dsum, Args g, int64_t n_tiles, int64_t bh) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kLd = D + 8, kT = kTile * kLd, kQN = D == 64 ? 64 : 32;
  bf16* Ks = reinterpret_cast<bf16*>(smem);
  bf16* Vs = Ks + kT;
  bf16* Qs = Vs + kT;       // two stages
  bf16* dOs = Qs + 2 * kT;  // two stages
  uint32_t* keep = reinterpret_cast<uint32_t*>(dOs + 2 * kT);
  float* lse_s = reinterpret_cast<float*>(keep + kThreads);  // two stages of kTile: lse · log2 e
  float* D_s = lse_s + 2 * kTile;                            // two stages of kTile: D
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int r0 = warp * 16;  // the warp's first key in the tile
  const int64_t tile = int64_t(blockIdx.x) / bh;
  const int64_t h = int64_t(blockIdx.x) % bh;
  const int64_t k0 = tile * kTile;
  const int64_t q_off = h * g.s * D, k_off = h * g.sk * D;
  // The first query that sees key k0: q_pos0 + qi >= k_pos0 + k0.
  const int64_t q_first = g.k_pos0 + k0 - g.q_pos0 > 0 ? g.k_pos0 + k0 - g.q_pos0 : 0;
  const int64_t q_begin = q_first / kTile * kTile;
  const int n_qt = q_begin < g.s ? int((g.s - q_begin + kTile - 1) / kTile) : 0;

  // Stage st: the query tile at qt (q, dO by cp.async or stores; lse, D stored).
  auto load_stage = [&](int st, int64_t qt) {
    load_tile<D>(Qs + st * kT, q, q_off, qt, g.s);
    load_tile<D>(dOs + st * kT, Operand{dctx, nullptr}, q_off, qt, g.s);
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
      const bool seen = qt + i < g.s && attn::visible(g, qt + i) > 0;
      lse_s[st * kTile + i] = seen ? lse[h * g.s + qt + i] * kLog2e : 0.f;
      D_s[st * kTile + i] = seen ? dsum[h * g.s + qt + i] : 0.f;
    }
  };
  load_tile<D>(Ks, k, k_off, k0, g.sk);
  load_tile<D>(Vs, v, k_off, k0, g.sk);
  if (n_qt > 0) load_stage(0, q_begin);
  cp_async_commit();

  const float sl2 = g.scale * kLog2e;
  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.f;

  for (int it = 0; it < n_qt; ++it) {
    const int64_t qt = q_begin + int64_t(it) * kTile;
    const int st = it & 1;
    if (it + 1 < n_qt) load_stage(st ^ 1, qt + kTile);
    cp_async_commit();
    if (g.dropout) keep_words(keep, g, h, qt, k0);
    cp_async_wait<1>();
    __syncthreads();
    const TileMask tm = tile_mask(g, qt, k0);  // (query, key)
    // Does any query of the tile see one of the warp's keys [r0, r0 + 16)?
    const bool any = r0 < tm.k_lim && r0 <= tm.q_lim - 1 + tm.diff;
    if (any) {
      const bool all = r0 + 16 <= tm.k_lim && tm.q_lim == kTile && r0 + 15 <= tm.diff;
      const bf16* Qb = Qs + st * kT;
      const bf16* dOb = dOs + st * kT;
      const float* lse_t = lse_s + st * kTile;
      const float* D_t = D_s + st * kTile;
#pragma unroll 1
      for (int qs = 0; qs < kTile; qs += kQN) {
        float s[kQN / 8][4], dp[kQN / 8][4];  // Sᵀ = K Qᵀ, dPᵀ = V dOᵀ: (16 keys, kQN queries)
#pragma unroll
        for (int j = 0; j < kQN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          uint32_t ak[4], av[4];
          load_a(ak, Ks + r0 * kLd, kLd, 16 * ks, lane);
          load_a(av, Vs + r0 * kLd, kLd, 16 * ks, lane);
#pragma unroll
          for (int jj = 0; jj < kQN / 16; ++jj) {
            uint32_t b[4];
            load_b_nk(b, Qb, kLd, qs + 16 * jj, 16 * ks, lane);
            mma(s[2 * jj], ak, b[0], b[1]);
            mma(s[2 * jj + 1], ak, b[2], b[3]);
            load_b_nk(b, dOb, kLd, qs + 16 * jj, 16 * ks, lane);
            mma(dp[2 * jj], av, b[0], b[1]);
            mma(dp[2 * jj + 1], av, b[2], b[3]);
          }
        }
#pragma unroll
        for (int j = 0; j < kQN / 8; ++j) {
          const int c0 = qs + 8 * j + 2 * tq;  // the lane's two queries c0, c0 + 1
          const float2 l2 = *reinterpret_cast<const float2*>(lse_t + c0);
          const float2 d2 = *reinterpret_cast<const float2*>(D_t + c0);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = r0 + gq + 8 * (e >> 1), c = c0 + (e & 1);
            const bool vis = all || tm.visible(c, key);
            const float pr = exp2f(fmaf(s[j][e], sl2, -((e & 1) ? l2.y : l2.x)));
            const float mult =
                g.dropout ? ((keep[2 * c + (key >> 5)] >> (key & 31)) & 1u ? g.keep_scale : 0.f)
                          : 1.f;
            const float Dq = (e & 1) ? d2.y : d2.x;
            s[j][e] = vis ? pr * mult : 0.f;                                   // m·P
            dp[j][e] = vis ? g.scale * pr * (dp[j][e] * mult - Dq) : 0.f;      // dS
          }
        }
        // dv += (m·P)ᵀ (16 keys, kQN) · dO (kQN, D); dk += dSᵀ · Q
#pragma unroll
        for (int kk = 0; kk < kQN / 16; ++kk) {
          uint32_t ap[4], ads[4];
          acc_to_a(ap, s, kk);
          acc_to_a(ads, dp, kk);
#pragma unroll
          for (int dd = 0; dd < D / 16; ++dd) {
            uint32_t b[4];
            load_b_kn(b, dOb, kLd, qs + 16 * kk, 16 * dd, lane);
            mma(dv_acc[2 * dd], ap, b[0], b[1]);
            mma(dv_acc[2 * dd + 1], ap, b[2], b[3]);
            load_b_kn(b, Qb, kLd, qs + 16 * kk, 16 * dd, lane);
            mma(dk_acc[2 * dd], ads, b[0], b[1]);
            mma(dk_acc[2 * dd + 1], ads, b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // this stage and the keep words are consumed
  }
  cp_async_wait<0>();

#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t kj = k0 + r0 + gq + 8 * u;
    if (kj >= g.sk) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int64_t at = k_off + kj * D + 8 * n + 2 * tq;
      *reinterpret_cast<float2*>(dk + at) = make_float2(dk_acc[n][2 * u], dk_acc[n][2 * u + 1]);
      *reinterpret_cast<float2*>(dv + at) = make_float2(dv_acc[n][2 * u], dv_acc[n][2 * u + 1]);
    }
  }
}

// ---------------------------------------------------------------- host side

// MT_CUDA_ATTENTION: fa (default), tc or simt; anything else is an error.
int impl_from_env() {
  const char* e = std::getenv("MT_CUDA_ATTENTION");
  const std::string_view s = e ? e : "";
  if (s.empty() || s == "fa") return int(AttentionImpl::kFa);
  if (s == "tc") return int(AttentionImpl::kTc);
  if (s == "simt") return int(AttentionImpl::kSimt);
  MT_FAIL("MT_CUDA_ATTENTION=", std::string(s), " is not an attention kernel; fix: unset it (fa, "
          "the default) or set fa, tc or simt");
}
// Read on first use (an error then reaches the caller, not a static initialiser).
std::atomic<int>& impl_state() {
  static std::atomic<int> state{impl_from_env()};
  return state;
}


// One head size for q, k, v (dv == d): other shapes (multi-latent
// attention's narrower values) take the generic kernels.
bool fa_supported(const AttentionDims& dims, int64_t blocks) {
  return dims.math == MathMode::kBF16 && (dims.d == 64 || dims.d == 128) &&
         attention_dv(dims) == dims.d && blocks < (int64_t(1) << 31);
}

template <int D>
void launch_forward(float* ctx, float* lse, Operand q, Operand k, Operand v, const Args& g,
                    int64_t bh) {
  const int64_t n_tiles = (g.s + kTile - 1) / kTile;
  constexpr size_t shared = forward_shared<D>();
  static const bool raised = (attn::allow_shared(fa_forward_kernel<D>, shared), true);
  (void)raised;
  fa_forward_kernel<D><<<unsigned(n_tiles * bh), kThreads, shared, stream()>>>(
      ctx, lse, q, k, v, g, n_tiles, bh);
  MT_CUDA_LAUNCH_CHECK();
}

struct BackwardArgs {
  float *dq, *dk, *dv, *dsum;
  const float *dctx, *lse;
  Operand q, k, v;
  Args g;
  int64_t bh;
  bool own_d;
};

template <int D>
void launch_backward(const BackwardArgs& B) {
  const int64_t q_tiles = (B.g.s + kTile - 1) / kTile, k_tiles = (B.g.sk + kTile - 1) / kTile;
  constexpr size_t rows = rows_shared<D>(), dkdv = dkdv_shared<D>();
  static const bool raised = (attn::allow_shared(fa_rows_kernel<D, true>, rows),
                              attn::allow_shared(fa_rows_kernel<D, false>, rows),
                              attn::allow_shared(fa_dkdv_kernel<D>, dkdv), true);
  (void)raised;
  const unsigned q_blocks = unsigned(q_tiles * B.bh);
  if (B.own_d) {  // the pre-pass: D of every row, read by dq and dk/dv
    fa_rows_kernel<D, true><<<q_blocks, kThreads, rows, stream()>>>(
        nullptr, B.dsum, B.dctx, B.q, B.k, B.v, B.lse, B.g, q_tiles, B.bh);
    MT_CUDA_LAUNCH_CHECK();
  }
  fa_rows_kernel<D, false><<<q_blocks, kThreads, rows, stream()>>>(
      B.dq, B.dsum, B.dctx, B.q, B.k, B.v, B.lse, B.g, q_tiles, B.bh);
  MT_CUDA_LAUNCH_CHECK();
  fa_dkdv_kernel<D><<<unsigned(k_tiles * B.bh), kThreads, dkdv, stream()>>>(
      B.dk, B.dv, B.dctx, B.q, B.k, B.v, B.lse, B.dsum, B.g, k_tiles, B.bh);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace

AttentionImpl attention_impl() { return AttentionImpl(impl_state().load(std::memory_order_relaxed)); }
AttentionImpl attention_impl(AttentionImpl impl) { return AttentionImpl(impl_state().exchange(int(impl))); }

bool attention_fa_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                          const AttentionDims& dims, const AttentionDropout& drop) {
  const Args g = attn::make_args(dims, drop);
  const int64_t bh = dims.b * dims.a, blocks = (g.s + kTile - 1) / kTile * bh;
  if (!fa_supported(dims, blocks) || !attn::aligned16(ctx) || !attn::aligned16(q.raw()) ||
      !attn::aligned16(k.raw()) || !attn::aligned16(v.raw()))
    return false;
  const Operand oq = attn::operand(q), ok = attn::operand(k), ov = attn::operand(v);
  if (dims.d == 64)
    launch_forward<64>(ctx, lse, oq, ok, ov, g, bh);
  else
    launch_forward<128>(ctx, lse, oq, ok, ov, g, bh);
  return true;
}

bool attention_fa_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                           ReadView k, ReadView v, const float* lse, const AttentionDims& dims,
                           const AttentionDropout& drop, float* workspace,
                           const float* row_dsum) {
  BackwardArgs B;
  B.g = attn::make_args(dims, drop);
  B.bh = dims.b * dims.a;
  const int64_t blocks =
      std::max((B.g.s + kTile - 1) / kTile, (B.g.sk + kTile - 1) / kTile) * B.bh;
  if (!fa_supported(dims, blocks) || !attn::aligned16(dq) || !attn::aligned16(dk) || !attn::aligned16(dv) ||
      !attn::aligned16(dctx) || !attn::aligned16(q.raw()) || !attn::aligned16(k.raw()) || !attn::aligned16(v.raw()))
    return false;
  B.dq = dq;
  B.dk = dk;
  B.dv = dv;
  B.dctx = dctx;
  B.lse = lse;
  B.q = attn::operand(q);
  B.k = attn::operand(k);
  B.v = attn::operand(v);
  // bf16 math: without row_dsum the row's own D (attention.h), as the CPU.
  B.own_d = row_dsum == nullptr;
  // D (b, a, s): the caller's, or written there by the pre-pass.
  B.dsum = attn::dsum_buffer(row_dsum, workspace, B.bh, B.g.s, B.g.sk);
  if (dims.d == 64)
    launch_backward<64>(B);
  else
    launch_backward<128>(B);
  return true;
}

}  // namespace mt::cuda
