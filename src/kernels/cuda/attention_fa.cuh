// Device pieces of the FlashAttention-2 kernels (attention_fa.cu): inline PTX
// (mma.sync m16n8k16 bf16, ldmatrix, cp.async), tile loads into shared memory
// and the dropout keep bits of a (64, 64) tile.
//
// Fragments of mma.m16n8k16 .bf16 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"), lane = 4 g + t (g = groupID,
// t = threadID_in_group):
//   A (16 x 16), 4 registers of 2 bf16 (low half = lower column):
//     r0: row g, cols 2t, 2t+1      r1: row g+8, cols 2t, 2t+1
//     r2: row g, cols 2t+8, 2t+9    r3: row g+8, cols 2t+8, 2t+9
//   B (16 x 8), 2 registers: r0: rows (k) 2t, 2t+1, col (n) g; r1: rows 2t+8, 2t+9
//   C (16 x 8), 4 floats: c0, c1: row g, cols 2t, 2t+1; c2, c3: row g+8
// So the accumulators of two adjacent n8 tiles (cols 16kk.. 16kk+15) packed
// pairwise to bf16x2 are the A fragment of k-step kk: {pack(c[2kk][0..1]),
// pack(c[2kk][2..3]), pack(c[2kk+1][0..1]), pack(c[2kk+1][2..3])}.
// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of 8x8 matrix i, whose
// register i a lane gets as row l/4, cols 2(l%4), +1 (.trans: rows 2(l%4), +1
// of col l/4, i.e. the transposed matrix).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_tile.cuh"

namespace mt::cuda::fa {

using bf16 = __nv_bfloat16;
using attn::Args;
using attn::Operand;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kTile = 64;  // rows of a block's tile and of a streamed tile
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}

// c (16 x 8) += a (16 x 16) · b (16 x 8), fp32 accumulators.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

// A fragment (16 x 16) of rows [0, 16), cols [k0, k0 + 16) of the row-major
// bf16 matrix at p (row stride ld elements).
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* p, int ld, int k0,
                                       int lane) {
  const int mi = lane >> 3;
  ldsm_x4(a, p + ((lane & 7) + ((mi & 1) << 3)) * ld + k0 + ((mi >> 1) << 3));
}
// B fragments of B(k, n) = M[n][k] (M row-major at p: rows are n), k-step
// [k0, k0 + 16): b[0], b[1] of n-tile [n0, n0 + 8), b[2], b[3] of n0 + 8.
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const bf16* p, int ld, int n0,
                                          int k0, int lane) {
  const int mi = lane >> 3;
  ldsm_x4(b, p + (n0 + (lane & 7) + ((mi >> 1) << 3)) * ld + k0 + ((mi & 1) << 3));
}
// B fragments of B(k, n) = M[k][n] (M row-major at p: rows are k), likewise.
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const bf16* p, int ld, int k0,
                                          int n0, int lane) {
  const int mi = lane >> 3;
  ldsm_x4_trans(b, p + (k0 + (lane & 7) + ((mi & 1) << 3)) * ld + n0 + ((mi >> 1) << 3));
}

// The A fragment of k-step kk from fp32 accumulators x[n-tile][4] (pairs
// rounded to bf16, round to nearest even).
template <int N>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&x)[N][4], int kk) {
  a[0] = pack_bf16(x[2 * kk][0], x[2 * kk][1]);
  a[1] = pack_bf16(x[2 * kk][2], x[2 * kk][3]);
  a[2] = pack_bf16(x[2 * kk + 1][0], x[2 * kk + 1][1]);
  a[3] = pack_bf16(x[2 * kk + 1][2], x[2 * kk + 1][3]);
}

// dst (kTile, D + 8) bf16 = rows [row0, row0 + kTile) of src (rows of D from
// element off), zero from n_rows on. bf16 storage: cp.async (the caller
// commits and waits); fp32: rounded to bf16 (bf16_from_f32) and stored. All
// threads of the block take part.
template <int D>
__device__ __forceinline__ void load_tile(bf16* dst, Operand src, int64_t off, int64_t row0,
                                          int64_t n_rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks of 8 bf16
  for (int i = threadIdx.x; i < kTile * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    bf16* to = dst + r * (D + 8) + c;
    if (row0 + r >= n_rows) {
      *reinterpret_cast<uint4*>(to) = make_uint4(0u, 0u, 0u, 0u);
      continue;
    }
    const int64_t at = off + (row0 + r) * D + c;
    if (src.bf16) {
      cp_async16(to, src.bf16 + at);
    } else {
      const float4 x0 = __ldg(reinterpret_cast<const float4*>(src.f32 + at));
      const float4 x1 = __ldg(reinterpret_cast<const float4*>(src.f32 + at + 4));
      *reinterpret_cast<uint4*>(to) =
          make_uint4(pack_bf16(x0.x, x0.y), pack_bf16(x0.z, x0.w), pack_bf16(x1.x, x1.y),
                     pack_bf16(x1.z, x1.w));
    }
  }
}

// Global dropout index of (head h, local query qi, local key 0).
__device__ __forceinline__ uint64_t drop_row_base(const Args& g, int64_t h, int64_t qi) {
  const int64_t bi = h / g.a, j = h - bi * g.a;
  return uint64_t(
      (((g.sample0 + bi) * g.a_global + g.head0 + j) * g.s_global + g.q_pos0 + qi) * g.s_global +
      g.k_pos0);
}

// Bit j (j < n <= 32) set when dropout keeps global index first + j
// (RngStream::uniform >= p, as attn::dropout_mult); one Philox block per four
// consecutive indices.
__device__ __forceinline__ uint32_t keep_bits(uint64_t first, int n, uint64_t step, uint32_t k0,
                                           uint32_t k1, float p) {
  uint32_t bits = 0;
  uint4 w = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll 1
  for (int j = 0; j < n; ++j) {
    const uint64_t index = first + uint64_t(j);
    const int sel = int(index & 3);
    if (j == 0 || sel == 0) w = attn::philox_block(index >> 2, step, k0, k1);
    const uint32_t word = sel == 0 ? w.x : sel == 1 ? w.y : sel == 2 ? w.z : w.w;
    if (float(word >> 8) * (1.0f / 16777216.0f) >= p) bits |= 1u << j;
  }
  return bits;
}

// keep[2 r + u] = keep bits of local query q0 + r, local keys [k0 + 32 u,
// k0 + 32 u + 32) (bits past the row's visible keys: 0), r < kTile: one word
// per thread. Every thread of the block calls it.
__device__ __forceinline__ void keep_words(uint32_t* keep, const Args& g, int64_t h, int64_t q0,
                                           int64_t k0) {
  const int r = threadIdx.x >> 1, u = threadIdx.x & 1;
  const int64_t qi = q0 + r, key0 = k0 + 32 * u;
  int64_t lim = qi < g.s ? attn::visible(g, qi) - key0 : 0;
  lim = lim < 0 ? 0 : lim > 32 ? 32 : lim;
  keep[threadIdx.x] =
      lim > 0 ? keep_bits(drop_row_base(g, h, qi) + uint64_t(key0), int(lim), g.step, g.k0, g.k1,
                          g.p)
              : 0u;
}

// The visible part of a (64 queries, 64 keys) tile pair at local query q0 and
// key k0: (r, c) visible iff r < q_lim, c < k_lim and c <= r + diff.
struct TileMask {
  int q_lim, k_lim, diff;
  __device__ __forceinline__ bool visible(int r, int c) const {
    return r < q_lim && c < k_lim && c <= r + diff;
  }
};
__device__ __forceinline__ TileMask tile_mask(const Args& g, int64_t q0, int64_t k0) {
  const int64_t ql = g.s - q0, kl = g.sk - k0;
  int64_t diff = g.q_pos0 + q0 - g.k_pos0 - k0;  // key c visible to query r: c <= r + diff
  diff = diff < -2 * kTile ? -2 * kTile : diff > 2 * kTile ? 2 * kTile : diff;
  return TileMask{int(ql < kTile ? ql : kTile), int(kl < kTile ? kl : kTile), int(diff)};
}

}  // namespace mt::cuda::fa
