// CUDA attention backward (FlashAttention-2 style: probabilities recomputed
// from the saved lse), deterministic (no atomics), in up to three launches:
//   1. D = rowsum(dctx * ctx) (fp32 math without row_dsum), into `dsum`;
//   2. dq: one block per (query tile, head), key tiles streamed; in bf16/fp16
//      math without row_dsum it first makes a pass of its own for the row's
//      D = Σ_j P_j dP̃_j (as the CPU, from the rounded operands) and stores it;
//   3. dk, dv: one block per (key tile, head), query tiles streamed.
// With S = q·kᵀ, P = exp(S·scale - lse), dP = dctx·vᵀ and the dropout
// multiplier m (keep_scale or 0): dv += (m·P)ᵀ dctx, dS = scale·P·(m·dP - D),
// dk += dSᵀ q, dq += dS k; operands rounded as the math mode's matmuls round.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_fa.h"
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/attention_tile.cuh"

namespace mt::cuda {
namespace {
using namespace attn;

// dq pass: kQ query rows (kRowsPerWarp per warp) against key tiles of kK
// (lanes own keys l, l + 32). dk/dv pass: kKT keys (kRowsPerWarp per warp)
// against query tiles of kQT (lanes own queries l, l + 32).
constexpr int kQ = kWarps * kRowsPerWarp, kK = 64;
constexpr int kKT = kWarps * kRowsPerWarp, kQT = 64;

size_t dq_shared_bytes(int64_t d, int64_t dv) {
  return sizeof(float) * size_t((kQ + kK) * (d + 1) + (kQ + kK) * (dv + 1) + kQ * kK);
}
size_t dkdv_shared_bytes(int64_t d, int64_t dv) {
  return sizeof(float) *
         size_t((kKT + kQT) * (d + 1) + (kKT + kQT) * (dv + 1) + 2 * kKT * kQT + 2 * kQT);
}

// Scores and output gradients of rows a (n_a of them, stride ld) against rows
// b0, b1 (the lane's two): s[r][u] = A_r · B_u over d features,
// dp[r][u] = dA_r · dB_u over dv (rows of stride ldv). One pass when the
// sizes agree, else one per product.
__device__ __forceinline__ void dots(float (&s)[kRowsPerWarp][2], float (&dp)[kRowsPerWarp][2],
                                     const float* A, const float* dA, const float* B0,
                                     const float* B1, const float* dB0, const float* dB1, int ld,
                                     int d, int ldv, int dv) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) s[r][0] = s[r][1] = dp[r][0] = dp[r][1] = 0.f;
  if (dv == d) {
#pragma unroll 2
    for (int t = 0; t < d; ++t) {
      const float b0 = B0[t], b1 = B1[t], db0 = dB0[t], db1 = dB1[t];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float a = A[r * ld + t], da = dA[r * ld + t];
        s[r][0] = fmaf(a, b0, s[r][0]);
        s[r][1] = fmaf(a, b1, s[r][1]);
        dp[r][0] = fmaf(da, db0, dp[r][0]);
        dp[r][1] = fmaf(da, db1, dp[r][1]);
      }
    }
    return;
  }
#pragma unroll 2
  for (int t = 0; t < d; ++t) {
    const float b0 = B0[t], b1 = B1[t];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float a = A[r * ld + t];
      s[r][0] = fmaf(a, b0, s[r][0]);
      s[r][1] = fmaf(a, b1, s[r][1]);
    }
  }
#pragma unroll 2
  for (int t = 0; t < dv; ++t) {
    const float db0 = dB0[t], db1 = dB1[t];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float da = dA[r * ldv + t];
      dp[r][0] = fmaf(da, db0, dp[r][0]);
      dp[r][1] = fmaf(da, db1, dp[r][1]);
    }
  }
}

// dq [=] of one query tile; OWN_D: first D of its rows from P and dP, stored
// into dsum; else D read from dsum. Shared: Qs (kQ, d+1), dOs (kQ, dv+1),
// Ks (kK, d+1), Vs (kK, dv+1), Ps (kQ, kK): dS·scale.
template <int NC, bool OWN_D>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(float* dq, float* dsum, const float* dctx, Operand q, Operand k, Operand v,
              const float* lse, Args g, int64_t n_tiles) {
  extern __shared__ float smem[];
  const int d = int(g.d), ld = d + 1, dv = int(g.dv), ldv = dv + 1;
  float* Qs = smem;
  float* dOs = Qs + kQ * ld;
  float* Ks = dOs + kQ * ldv;
  float* Vs = Ks + kK * ld;
  float* Ps = Vs + kK * ldv;
  const int64_t tile = n_tiles - 1 - int64_t(blockIdx.x) % n_tiles;
  const int64_t h = int64_t(blockIdx.x) / n_tiles;
  const int64_t q0 = tile * kQ;
  const int64_t q_off = h * g.s * g.d, k_off = h * g.sk * g.d;
  const int64_t c_off = h * g.s * g.dv, v_off = h * g.sk * g.dv;  // dctx's and v's
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * kRowsPerWarp;

  load_rows(Qs, ld, q, q_off, q0, kQ, g.s, d, g.math);
  load_rows(dOs, ldv, Operand{dctx, nullptr}, c_off, q0, kQ, g.s, dv, g.math);
  int64_t nk[kRowsPerWarp];
  float row_lse[kRowsPerWarp], D[kRowsPerWarp], acc[kRowsPerWarp][NC];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t qi = q0 + row0 + r;
    nk[r] = qi < g.s ? visible(g, qi) : 0;
    row_lse[r] = nk[r] > 0 ? lse[h * g.s + qi] : 0.f;
    D[r] = !OWN_D && nk[r] > 0 ? dsum[h * g.s + qi] : 0.f;
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.f;
  }
  const int64_t q_last = (q0 + kQ < g.s ? q0 + kQ : g.s) - 1;
  const int64_t kv_end = visible(g, q_last);
  const float* A = Qs + row0 * ld;
  const float* dA = dOs + row0 * ldv;

  // P (visible) and the dropout multiplier of the warp's row r and key kj.
  auto prob = [&](int r, int64_t kj, float score, float& mult) {
    mult = 1.f;
    if (kj >= nk[r]) return 0.f;
    const float p = expf(score * g.scale - row_lse[r]);
    if (g.dropout) mult = dropout_mult(g, h, q0 + row0 + r, kj);
    return p;
  };

  if (OWN_D) {
    float part[kRowsPerWarp] = {};
    for (int64_t kt = 0; kt < kv_end; kt += kK) {
      __syncthreads();
      load_rows(Ks, ld, k, k_off, kt, kK, g.sk, d, g.math);
      load_rows(Vs, ldv, v, v_off, kt, kK, g.sk, dv, g.math);
      __syncthreads();
      float s[kRowsPerWarp][2], dp[kRowsPerWarp][2];
      dots(s, dp, A, dA, Ks + lane * ld, Ks + (lane + 32) * ld, Vs + lane * ldv,
           Vs + (lane + 32) * ldv, ld, d, ldv, dv);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          float mult;
          const float p = prob(r, kt + lane + 32 * u, s[r][u], mult);
          part[r] = fmaf(p, dp[r][u] * mult, part[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      D[r] = warp_sum(part[r]);
      const int64_t qi = q0 + row0 + r;
      if (lane == 0 && qi < g.s) dsum[h * g.s + qi] = D[r];
    }
  }

  for (int64_t kt = 0; kt < kv_end; kt += kK) {
    __syncthreads();
    load_rows(Ks, ld, k, k_off, kt, kK, g.sk, d, g.math);
    load_rows(Vs, ldv, v, v_off, kt, kK, g.sk, dv, g.math);
    __syncthreads();
    float s[kRowsPerWarp][2], dp[kRowsPerWarp][2];
    dots(s, dp, A, dA, Ks + lane * ld, Ks + (lane + 32) * ld, Vs + lane * ldv,
         Vs + (lane + 32) * ldv, ld, d, ldv, dv);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float mult;
        const float p = prob(r, kt + lane + 32 * u, s[r][u], mult);
        Ps[(row0 + r) * kK + lane + 32 * u] =
            round_operand(g.scale * p * (dp[r][u] * mult - D[r]), g.math);
      }
    __syncwarp();
    // dq (rows, d) += dS (rows, keys) · K (keys, d)
    const int jn = int(kv_end - kt < kK ? kv_end - kt : kK);
    for (int j = 0; j < jn; ++j) {
      float kj[NC];
#pragma unroll
      for (int c = 0; c < NC; ++c) kj[c] = lane + 32 * c < d ? Ks[j * ld + lane + 32 * c] : 0.f;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float ds = Ps[(row0 + r) * kK + j];
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[r][c] = fmaf(ds, kj[c], acc[r][c]);
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t qi = q0 + row0 + r;
    if (qi >= g.s) continue;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (lane + 32 * c < d) dq[q_off + qi * g.d + lane + 32 * c] = acc[r][c];
  }
}

// dk, dv [=] of one key tile (keys no query sees get 0). Shared: Ks (kKT, d+1),
// Vs (kKT, dv+1), Qs (kQT, d+1), dOs (kQT, dv+1), Pt, dSt (kKT, kQT), lse and D
// of the query tile.
template <int NC>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(float* dk, float* dv, const float* dctx, Operand q, Operand k, Operand v,
                const float* lse, const float* dsum, Args g, int64_t n_tiles) {
  extern __shared__ float smem[];
  const int d = int(g.d), ld = d + 1, dv_ = int(g.dv), ldv = dv_ + 1;
  float* Ks = smem;
  float* Vs = Ks + kKT * ld;
  float* Qs = Vs + kKT * ldv;
  float* dOs = Qs + kQT * ld;
  float* Pt = dOs + kQT * ldv;
  float* dSt = Pt + kKT * kQT;
  float* lse_s = dSt + kKT * kQT;
  float* D_s = lse_s + kQT;
  const int64_t tile = int64_t(blockIdx.x) % n_tiles;  // the first keys have the most queries
  const int64_t h = int64_t(blockIdx.x) / n_tiles;
  const int64_t k0 = tile * kKT;
  const int64_t q_off = h * g.s * g.d, k_off = h * g.sk * g.d;
  const int64_t c_off = h * g.s * g.dv, v_off = h * g.sk * g.dv;  // dctx's and v's
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key0 = warp * kRowsPerWarp;  // the warp's keys in the tile

  load_rows(Ks, ld, k, k_off, k0, kKT, g.sk, d, g.math);
  load_rows(Vs, ldv, v, v_off, k0, kKT, g.sk, dv_, g.math);
  float dk_acc[kRowsPerWarp][NC], dv_acc[kRowsPerWarp][NC];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) dk_acc[r][c] = dv_acc[r][c] = 0.f;
  // The first query that sees key k0: q_pos0 + qi >= k_pos0 + k0.
  const int64_t q_first = g.k_pos0 + k0 - g.q_pos0 > 0 ? g.k_pos0 + k0 - g.q_pos0 : 0;
  const float* A = Ks + key0 * ld;
  const float* dA = Vs + key0 * ldv;

  for (int64_t qt = q_first / kQT * kQT; qt < g.s && k0 < g.sk; qt += kQT) {
    __syncthreads();
    load_rows(Qs, ld, q, q_off, qt, kQT, g.s, d, g.math);
    load_rows(dOs, ldv, Operand{dctx, nullptr}, c_off, qt, kQT, g.s, dv_, g.math);
    for (int i = threadIdx.x; i < kQT; i += blockDim.x) {
      const bool in = qt + i < g.s && visible(g, qt + i) > 0;
      lse_s[i] = in ? lse[h * g.s + qt + i] : 0.f;
      D_s[i] = in ? dsum[h * g.s + qt + i] : 0.f;
    }
    __syncthreads();
    // s[r][u] = k_r · q_u, dp[r][u] = v_r · dctx_u for the lane's queries u.
    float s[kRowsPerWarp][2], dp[kRowsPerWarp][2];
    dots(s, dp, A, dA, Qs + lane * ld, Qs + (lane + 32) * ld, dOs + lane * ldv,
         dOs + (lane + 32) * ldv, ld, d, ldv, dv_);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t kj = k0 + key0 + r;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int i = lane + 32 * u;
        const int64_t qi = qt + i;
        float p = 0.f, ds = 0.f;
        if (qi < g.s && kj < g.sk && g.k_pos0 + kj <= g.q_pos0 + qi) {
          const float pr = expf(s[r][u] * g.scale - lse_s[i]);
          const float mult = g.dropout ? dropout_mult(g, h, qi, kj) : 1.f;
          p = round_operand(pr * mult, g.math);
          ds = round_operand(g.scale * pr * (dp[r][u] * mult - D_s[i]), g.math);
        }
        Pt[(key0 + r) * kQT + i] = p;
        dSt[(key0 + r) * kQT + i] = ds;
      }
    }
    __syncwarp();
    // dv (keys, dv) += Pᵀ · dctx, dk (keys, d) += dSᵀ · q over the tile's queries
    const int in = int(g.s - qt < kQT ? g.s - qt : kQT);
    for (int i = 0; i < in; ++i) {
      float qv[NC], dov[NC];
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        qv[c] = lane + 32 * c < d ? Qs[i * ld + lane + 32 * c] : 0.f;
        dov[c] = lane + 32 * c < dv_ ? dOs[i * ldv + lane + 32 * c] : 0.f;
      }
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float p = Pt[(key0 + r) * kQT + i], ds = dSt[(key0 + r) * kQT + i];
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          dv_acc[r][c] = fmaf(p, dov[c], dv_acc[r][c]);
          dk_acc[r][c] = fmaf(ds, qv[c], dk_acc[r][c]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t kj = k0 + key0 + r;
    if (kj >= g.sk) continue;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      if (lane + 32 * c < d) dk[k_off + kj * g.d + lane + 32 * c] = dk_acc[r][c];
      if (lane + 32 * c < dv_) dv[v_off + kj * g.dv + lane + 32 * c] = dv_acc[r][c];
    }
  }
}

struct Launch {
  float *dq, *dk, *dv, *dsum;
  const float* dctx;
  Operand q, k, v;
  const float* lse;
  Args g;
  int64_t bh;
  bool own_d;
};

template <int NC>
void launch_backward(const Launch& L) {
  const int64_t q_tiles = (L.g.s + kQ - 1) / kQ, k_tiles = (L.g.sk + kKT - 1) / kKT;
  const size_t dq_shared = dq_shared_bytes(L.g.d, L.g.dv);
  const size_t dkdv_shared = dkdv_shared_bytes(L.g.d, L.g.dv);
  const unsigned dq_blocks = unsigned(q_tiles * L.bh), dkdv_blocks = unsigned(k_tiles * L.bh);
  if (L.own_d) {
    allow_shared(dq_kernel<NC, true>, dq_shared);
    dq_kernel<NC, true><<<dq_blocks, kThreads, dq_shared, stream()>>>(
        L.dq, L.dsum, L.dctx, L.q, L.k, L.v, L.lse, L.g, q_tiles);
  } else {
    allow_shared(dq_kernel<NC, false>, dq_shared);
    dq_kernel<NC, false><<<dq_blocks, kThreads, dq_shared, stream()>>>(
        L.dq, L.dsum, L.dctx, L.q, L.k, L.v, L.lse, L.g, q_tiles);
  }
  MT_CUDA_LAUNCH_CHECK();
  allow_shared(dkdv_kernel<NC>, dkdv_shared);
  dkdv_kernel<NC><<<dkdv_blocks, kThreads, dkdv_shared, stream()>>>(
      L.dk, L.dv, L.dctx, L.q, L.k, L.v, L.lse, L.dsum, L.g, k_tiles);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace

void attention_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                        ReadView k, ReadView v, ReadView ctx, const float* lse,
                        const AttentionDims& dims, const AttentionDropout& drop,
                        float* workspace, const float* row_dsum) {
  // The entry point (attention.cc) has checked the pointers, views and positions.
  // bf16 math, d of 64 or 128: the tensor-core kernels, attention_fa.cu
  // (MT_CUDA_ATTENTION=fa) or attention_tc.cu, unless SIMT is chosen.
  const AttentionImpl impl = attention_impl();
  if (impl == AttentionImpl::kFa &&
      attention_fa_backward(dq, dk, dv, dctx, q, k, v, lse, dims, drop, workspace, row_dsum))
    return;
  if (impl != AttentionImpl::kSimt &&
      attention_tc_backward(dq, dk, dv, dctx, q, k, v, lse, dims, drop, workspace, row_dsum))
    return;
  MT_CHECK(std::max(dims.d, attention_dv(dims)) <= kMaxHeadDim,
           "attention_backward (cuda): head dims d=", dims.d, " dv=", attention_dv(dims),
           " exceed the GPU kernel's ", kMaxHeadDim,
           "; fix: use more heads of at most 128 dims, or --device cpu");
  Launch L;
  L.g = make_args(dims, drop);
  L.bh = dims.b * dims.a;
  const int64_t blocks = std::max((L.g.s + kQ - 1) / kQ, (L.g.sk + kKT - 1) / kKT) * L.bh;
  MT_CHECK(blocks < (int64_t(1) << 31), "attention_backward (cuda): ", blocks,
           " blocks exceed the grid; fix: a smaller micro-batch or sequence");
  L.dq = dq;
  L.dk = dk;
  L.dv = dv;
  L.dctx = dctx;
  L.q = operand(q);
  L.k = operand(k);
  L.v = operand(v);
  L.lse = lse;
  L.own_d = row_dsum == nullptr && dims.math != MathMode::kF32;
  // D (b, a, s): the caller's, or computed into the workspace (or scratch).
  const int64_t rows = L.bh * L.g.s;
  float* dsum = dsum_buffer(row_dsum, workspace, L.bh, L.g.s, L.g.sk);
  if (row_dsum == nullptr && !L.own_d)
    attention_row_dsum(dsum, dctx, ctx.f32, rows, attention_dv(dims));
  L.dsum = dsum;  // written only by the own-D pass, which has no row_dsum
  switch (chunks_for(dims)) {
    case 1: return launch_backward<1>(L);
    case 2: return launch_backward<2>(L);
    case 3: return launch_backward<3>(L);
    default: return launch_backward<4>(L);
  }
}

}  // namespace mt::cuda
