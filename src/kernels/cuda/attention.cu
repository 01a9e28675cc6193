// CUDA attention forward (online softmax, FlashAttention style), merge and
// row sums; backward in attention_backward.cu.
//
// Forward: one block per (query tile of kQ rows, head), the heaviest (last)
// query tiles first. Key tiles of kK keys stream through shared memory; each
// warp owns kRowsPerWarp query rows and keeps their running max, sum and
// context in registers, so no (s, s) matrix and no workspace is needed. Lane
// l scores keys l and l + 32 of the tile and, for P·v, owns head-dim columns
// l + 32c. Operands are rounded as the math mode's matmuls round them (q, k,
// v, and the probabilities before P·v); everything else is fp32. The
// probabilities are rounded before normalisation (the CPU rounds P = e / sum):
// the same up to one bf16 rounding.
#include <cuda_runtime.h>

#include <cmath>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_fa.h"
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/attention_tile.cuh"

namespace mt::cuda {
namespace {
using namespace attn;

constexpr int kQ = kWarps * kRowsPerWarp;  // 32 query rows per block
constexpr int kK = 64;                     // keys per tile (two per lane)

size_t forward_shared_bytes(int64_t d, int64_t dv) {
  return sizeof(float) * size_t((kQ + kK) * (d + 1) + kK * (dv + 1) + kQ * kK);
}

// ctx, lse [=] for query tile (gridDim.x: n_tiles tiles per head, heads).
// Shared: Qs (kQ, d+1), Ks (kK, d+1), Vs (kK, dv+1), Ps (kQ, kK).
template <int NC>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(float* ctx, float* lse, Operand q, Operand k, Operand v, Args g,
                   int64_t n_tiles) {
  extern __shared__ float smem[];
  const int d = int(g.d), ld = d + 1, dv = int(g.dv), ldv = dv + 1;
  float* Qs = smem;
  float* Ks = Qs + kQ * ld;
  float* Vs = Ks + kK * ld;
  float* Ps = Vs + kK * ldv;
  const int64_t tile = n_tiles - 1 - int64_t(blockIdx.x) % n_tiles;
  const int64_t h = int64_t(blockIdx.x) / n_tiles;
  const int64_t q0 = tile * kQ;
  const int64_t q_off = h * g.s * g.d, k_off = h * g.sk * g.d;
  const int64_t c_off = h * g.s * g.dv, v_off = h * g.sk * g.dv;  // ctx's and v's
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * kRowsPerWarp;  // in the tile

  load_rows(Qs, ld, q, q_off, q0, kQ, g.s, d, g.math);
  int64_t nk[kRowsPerWarp];
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][NC];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t qi = q0 + row0 + r;
    nk[r] = qi < g.s ? visible(g, qi) : 0;
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = 0.f;
  }
  const int64_t q_last = (q0 + kQ < g.s ? q0 + kQ : g.s) - 1;
  const int64_t kv_end = visible(g, q_last);  // keys any row of the tile sees

  for (int64_t kt = 0; kt < kv_end; kt += kK) {
    __syncthreads();  // the previous tile's Ks, Vs are consumed (and Qs is loaded)
    load_rows(Ks, ld, k, k_off, kt, kK, g.sk, d, g.math);
    load_rows(Vs, ldv, v, v_off, kt, kK, g.sk, dv, g.math);
    __syncthreads();
    // Scores of the warp's rows against keys kt + lane and kt + lane + 32.
    float sc[kRowsPerWarp][2] = {};
    const float* k0 = Ks + lane * ld;
    const float* k1 = Ks + (lane + 32) * ld;
#pragma unroll 4
    for (int t = 0; t < d; ++t) {
      const float a0 = k0[t], a1 = k1[t];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float qv = Qs[(row0 + r) * ld + t];
        sc[r][0] = fmaf(qv, a0, sc[r][0]);
        sc[r][1] = fmaf(qv, a1, sc[r][1]);
      }
    }
    // Online softmax: rescale the row's running sum and context to the new max.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float pr[2] = {0.f, 0.f};
      float x[2];
#pragma unroll
      for (int u = 0; u < 2; ++u)
        x[u] = kt + lane + 32 * u < nk[r] ? sc[r][u] * g.scale : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(fmaxf(x[0], x[1])));
      if (m_new != -INFINITY) {  // warp-uniform: the row sees a key by now
        const float corr = expf(m[r] - m_new);  // 0 while m was -inf
#pragma unroll
        for (int u = 0; u < 2; ++u) pr[u] = expf(x[u] - m_new);  // masked: 0
        l[r] = l[r] * corr + warp_sum(pr[0] + pr[1]);
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[r][c] *= corr;
        m[r] = m_new;
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (g.dropout && pr[u] != 0.f)
            pr[u] *= dropout_mult(g, h, q0 + row0 + r, kt + lane + 32 * u);
          pr[u] = round_operand(pr[u], g.math);
        }
      }
      Ps[(row0 + r) * kK + lane] = pr[0];
      Ps[(row0 + r) * kK + lane + 32] = pr[1];
    }
    __syncwarp();
    // acc (rows, dv) += P (rows, keys) · V (keys, dv); masked probabilities are 0.
    const int jn = int(kv_end - kt < kK ? kv_end - kt : kK);
    for (int j = 0; j < jn; ++j) {
      float vj[NC];
#pragma unroll
      for (int c = 0; c < NC; ++c) vj[c] = lane + 32 * c < dv ? Vs[j * ldv + lane + 32 * c] : 0.f;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float p = Ps[(row0 + r) * kK + j];
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[r][c] = fmaf(p, vj[c], acc[r][c]);
      }
    }
    __syncwarp();  // Ps is rewritten by the next tile
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t qi = q0 + row0 + r;
    if (qi >= g.s) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // a row that sees no key: ctx 0
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (lane + 32 * c < dv) ctx[c_off + qi * g.dv + lane + 32 * c] = acc[r][c] * inv;
    if (lane == 0) lse[h * g.s + qi] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

template <int NC>
void launch_forward(float* ctx, float* lse, Operand q, Operand k, Operand v, const Args& g,
                    int64_t bh) {
  const int64_t n_tiles = (g.s + kQ - 1) / kQ;
  const size_t shared = forward_shared_bytes(g.d, g.dv);
  allow_shared(forward_kernel<NC>, shared);
  forward_kernel<NC><<<unsigned(n_tiles * bh), kThreads, shared, stream()>>>(ctx, lse, q, k, v, g,
                                                                             n_tiles);
  MT_CUDA_LAUNCH_CHECK();
}

// One warp per row: ctx, lse merged with the block's (attention.h).
__global__ void merge_kernel(float* ctx, float* lse, const float* ctx_block,
                             const float* lse_block, int64_t rows, int64_t d) {
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float l0 = lse[r], l1 = lse_block[r];
  if (l1 == -INFINITY) return;  // the block adds nothing
  float* c = ctx + r * d;
  const float* cb = ctx_block + r * d;
  if (l0 == -INFINITY) {
    for (int64_t t = lane; t < d; t += 32) c[t] = cb[t];
  } else {
    const float mx = fmaxf(l0, l1);
    const float l = mx + logf(expf(l0 - mx) + expf(l1 - mx));
    const float w0 = expf(l0 - l), w1 = expf(l1 - l);
    for (int64_t t = lane; t < d; t += 32) c[t] = c[t] * w0 + cb[t] * w1;
    __syncwarp();  // every lane has read lse[r] before it changes
    if (lane == 0) lse[r] = l;
    return;
  }
  __syncwarp();
  if (lane == 0) lse[r] = l1;
}

// One warp per row: dsum = dctx · ctx (fp32, a fixed lane-then-tree order).
__global__ void row_dsum_kernel(float* dsum, const float* dctx, const float* ctx, int64_t rows,
                                int64_t d) {
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float acc = 0.f;
  for (int64_t t = lane; t < d; t += 32) acc = fmaf(dctx[r * d + t], ctx[r * d + t], acc);
  acc = warp_sum(acc);
  if (lane == 0) dsum[r] = acc;
}

}  // namespace

void attention_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                       const AttentionDims& dims, const AttentionDropout& drop, float* workspace) {
  // The entry point (attention.cc) has checked the pointers, views and positions.
  // bf16 math, d of 64 or 128: the tensor-core kernels, attention_fa.cu
  // (MT_CUDA_ATTENTION=fa) or attention_tc.cu, unless SIMT is chosen.
  const AttentionImpl impl = attention_impl();
  if (impl == AttentionImpl::kFa && attention_fa_forward(ctx, lse, q, k, v, dims, drop)) return;
  if (impl != AttentionImpl::kSimt && attention_tc_forward(ctx, lse, q, k, v, dims, drop)) return;
  MT_CHECK(std::max(dims.d, attention_dv(dims)) <= kMaxHeadDim,
           "attention_forward (cuda): head dims d=", dims.d, " dv=", attention_dv(dims),
           " exceed the GPU kernel's ", kMaxHeadDim,
           "; fix: use more heads of at most 128 dims, or --device cpu");
  const Args g = make_args(dims, drop);
  const int64_t bh = dims.b * dims.a, n_tiles = (g.s + kQ - 1) / kQ;
  MT_CHECK(n_tiles * bh < (int64_t(1) << 31), "attention_forward (cuda): ", n_tiles * bh,
           " blocks exceed the grid; fix: a smaller micro-batch or sequence");
  const Operand oq = operand(q), ok = operand(k), ov = operand(v);
  switch (chunks_for(dims)) {
    case 1: return launch_forward<1>(ctx, lse, oq, ok, ov, g, bh);
    case 2: return launch_forward<2>(ctx, lse, oq, ok, ov, g, bh);
    case 3: return launch_forward<3>(ctx, lse, oq, ok, ov, g, bh);
    default: return launch_forward<4>(ctx, lse, oq, ok, ov, g, bh);
  }
}

void attention_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                     int64_t rows, int64_t d) {
  if (rows <= 0) return;
  merge_kernel<<<blocks_for(rows, kWarps), kThreads, 0, stream()>>>(ctx, lse, ctx_block,
                                                                    lse_block, rows, d);
  MT_CUDA_LAUNCH_CHECK();
}

void attention_row_dsum(float* dsum, const float* dctx, const float* ctx, int64_t rows,
                        int64_t d) {
  if (rows <= 0) return;
  row_dsum_kernel<<<blocks_for(rows, kWarps), kThreads, 0, stream()>>>(dsum, dctx, ctx, rows, d);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
