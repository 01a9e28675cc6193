// Tensor-core attention in bf16 math (see attention_tc.h): FlashAttention-2's
// structure on nvcuda::wmma (bf16 16x16x16 fragments, fp32 accumulators).
//
// Every block has kTcWarps warps; a warp owns a strip of 16 rows (queries, or
// keys in dk/dv) of the block's 64 and streams tiles of 64 (keys, or queries)
// through shared memory as bf16 (q, k, v, dctx rounded on load: the CPU's bf16
// operands). A warp's products land in its own fp32 scratch (16, 64); its
// lanes then do the element-wise work there, two lanes per row (32 columns
// each) or, in dk/dv, one lane per column, and write the bf16 operand of the
// next product (P, dS) to a bf16 scratch of the warp.
//   forward: S = q kᵀ, online softmax in fp32 (base-2 exponent), P rounded
//     to bf16 before P·v (unnormalised, as the SIMT kernel), O scaled by 1/l
//     at the end; ctx rows that see no key get 0 and lse -inf.
//   backward: (1) per query tile: the row's own D = Σ_j P_j dP̃_j first (a
//     pass of its own over the keys, stored for (2); or D from row_dsum),
//     then dS = scale·P·(m·dP - D) rounded to bf16 and dq = dS·k;
//     (2) per key tile: dv = (m·P)ᵀ·dctx, dk = dSᵀ·q over the query tiles.
//     No atomics: every output element is written once, by one warp.
// The online-softmax rescale of O needs the row of each accumulator element,
// which the wmma API leaves to the hardware: every kernel reads it back once
// from a fragment loaded from a matrix of row numbers.
// Dropout multipliers are attention_tile.cuh's (the CPU's index and keep
// rule, bit for bit); a lane's run of consecutive keys shares Philox blocks.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/attention_tile.cuh"

namespace mt::cuda {
namespace {
using namespace nvcuda;
using attn::Args;
using attn::Operand;
using bf16 = __nv_bfloat16;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr int kTcWarps = 4, kTcThreads = 32 * kTcWarps;
constexpr int kStrip = 16;                 // rows of a warp
constexpr int kTile = kStrip * kTcWarps;   // rows of a block = columns of a streamed tile
static_assert(kTile == 64, "the element passes give a lane 32 of a strip's 64 columns");
constexpr int kLdS = kTile + 4;            // fp32 scratch row stride (floats)
constexpr int kLdP = kTile + 8;            // bf16 scratch row stride (elements)
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// Shared memory of one kernel, in bytes from the (128-byte aligned) start;
// every part starts on 32 bytes (wmma's pointer alignment).
//   tiles: `n_tiles` bf16 tiles (kTile, D + 8) (q, k, v, dctx);
//   per warp: `n_f32` fp32 scratches (16, kLdS), `n_b16` bf16 ones (16, kLdP),
//   16 floats of per-row factors; then 2 · kTile floats (lse and D of dk/dv).
// The fp32 scratches of a warp are contiguous: outputs (16, D + 4) are staged
// there at the end (D = 128 needs two of them).
template <int D>
struct Layout {
  static constexpr int kLdT = D + 8;
  int n_tiles, n_f32, n_b16;
  __host__ __device__ constexpr size_t tile_bytes() const { return size_t(kTile) * kLdT * 2; }
  __host__ __device__ constexpr size_t f32_floats() const {
    const size_t scores = size_t(n_f32) * kStrip * kLdS, staged = size_t(kStrip) * (D + 4);
    return scores > staged ? scores : staged;
  }
  __host__ __device__ constexpr size_t warp_bytes() const {
    return f32_floats() * 4 + size_t(n_b16) * kStrip * kLdP * 2 + kStrip * 4;
  }
  __host__ __device__ constexpr size_t warp0() const { return n_tiles * tile_bytes(); }
  __host__ __device__ constexpr size_t rows_at() const {
    return warp0() + kTcWarps * warp_bytes();
  }
  __host__ __device__ constexpr size_t total() const { return rows_at() + 2 * kTile * 4; }
  static_assert((kTile * kLdT * 2) % 32 == 0 && (kStrip * kLdS * 4) % 32 == 0 &&
                    (kStrip * kLdP * 2) % 32 == 0 && (kStrip * (D + 4) * 4) % 32 == 0,
                "wmma pointers must stay 32-byte aligned");
};

// The parts of one warp's scratch.
struct WarpScratch {
  float* f32;      // n_f32 (16, kLdS), contiguous
  bf16* b16;       // n_b16 (16, kLdP), contiguous
  float* rowv;     // 16 per-row factors
};
template <int D>
__device__ __forceinline__ WarpScratch warp_scratch(unsigned char* smem, const Layout<D>& L,
                                                    int warp) {
  unsigned char* base = smem + L.warp0() + size_t(warp) * L.warp_bytes();
  WarpScratch w;
  w.f32 = reinterpret_cast<float*>(base);
  w.b16 = reinterpret_cast<bf16*>(base + L.f32_floats() * 4);
  w.rowv = reinterpret_cast<float*>(base + L.f32_floats() * 4 + size_t(L.n_b16) * kStrip * kLdP * 2);
  return w;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

// dst (kTile, D + 8) = rows [row0, row0 + kTile) of src (rows of D from
// element `off`), rounded to bf16 (round to nearest even: bf16_from_f32);
// zero rows from n_rows on. All threads of the block take part.
template <int D>
__device__ __forceinline__ void load_tile(bf16* dst, Operand src, int64_t off, int64_t row0,
                                          int64_t n_rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks of 8 bf16
  for (int i = threadIdx.x; i < kTile * kChunks; i += kTcThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    uint4 u = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < n_rows) {
      const int64_t at = off + (row0 + r) * D + c;
      if (src.bf16) {
        u = __ldg(reinterpret_cast<const uint4*>(src.bf16 + at));
      } else {
        const float4 x0 = __ldg(reinterpret_cast<const float4*>(src.f32 + at));
        const float4 x1 = __ldg(reinterpret_cast<const float4*>(src.f32 + at + 4));
        u = make_uint4(pack_bf16(x0.x, x0.y), pack_bf16(x0.z, x0.w), pack_bf16(x1.x, x1.y),
                       pack_bf16(x1.z, x1.w));
      }
    }
    *reinterpret_cast<uint4*>(dst + r * (D + 8) + c) = u;
  }
}

// row_of[i] = the row (0..15) of element i of a lane's accumulator fragment;
// scratch: a (16, kLdS) fp32 scratch of the warp (free again on return).
__device__ __forceinline__ void accumulator_rows(int (&row_of)[FragC::num_elements],
                                                 float* scratch, int lane) {
  for (int i = lane; i < 256; i += 32) scratch[(i / 16) * kLdS + i % 16] = float(i / 16);
  __syncwarp();
  FragC f;
  wmma::load_matrix_sync(f, scratch, kLdS, wmma::mem_row_major);
#pragma unroll
  for (int i = 0; i < FragC::num_elements; ++i) row_of[i] = int(f.x[i]);
  __syncwarp();
}

// acc[j] (16, 16) = A (16, D) · B_jᵀ for the four 16-row blocks j of B
// (kTile, D); A and B bf16 of row stride D + 8. The (16, 64) result goes to
// out (row stride kLdS).
template <int D>
__device__ __forceinline__ void strip_times_tile_t(float* out, const bf16* A, const bf16* B) {
  FragC acc[kTile / 16];
#pragma unroll
  for (int j = 0; j < kTile / 16; ++j) wmma::fill_fragment(acc[j], 0.f);
#pragma unroll
  for (int t = 0; t < D / 16; ++t) {
    FragA a;
    wmma::load_matrix_sync(a, A + t * 16, D + 8);
#pragma unroll
    for (int j = 0; j < kTile / 16; ++j) {
      FragBt b;
      wmma::load_matrix_sync(b, B + j * 16 * (D + 8) + t * 16, D + 8);
      wmma::mma_sync(acc[j], a, b, acc[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kTile / 16; ++j)
    wmma::store_matrix_sync(out + j * 16, acc[j], kLdS, wmma::mem_row_major);
}

// acc[f] (16, 16 of D) += P (16, kTile; bf16, row stride kLdP) · B (kTile, D).
template <int D>
__device__ __forceinline__ void strip_times_tile(FragC (&acc)[D / 16], const bf16* P,
                                                 const bf16* B) {
#pragma unroll
  for (int j = 0; j < kTile / 16; ++j) {
    FragA a;
    wmma::load_matrix_sync(a, P + j * 16, kLdP);
#pragma unroll
    for (int f = 0; f < D / 16; ++f) {
      FragB b;
      wmma::load_matrix_sync(b, B + j * 16 * (D + 8) + f * 16, D + 8);
      wmma::mma_sync(acc[f], a, b, acc[f]);
    }
  }
}

// out rows [row0, row0 + 16) ∩ [0, n_rows) (row stride D, from element off)
// = acc, staged through the warp's fp32 scratch (16, D + 4).
template <int D>
__device__ __forceinline__ void write_strip(float* out, int64_t off, int64_t row0,
                                            int64_t n_rows, const FragC (&acc)[D / 16],
                                            float* staging, int lane) {
  __syncwarp();
#pragma unroll
  for (int f = 0; f < D / 16; ++f)
    wmma::store_matrix_sync(staging + f * 16, acc[f], D + 4, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < kStrip * D / 4; i += 32) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    if (row0 + r < n_rows)
      *reinterpret_cast<float4*>(out + off + (row0 + r) * D + c) =
          *reinterpret_cast<const float4*>(staging + r * (D + 4) + c);
  }
  __syncwarp();
}

// Global dropout index of (head h, local query qi, local key 0).
__device__ __forceinline__ uint64_t drop_row_base(const Args& g, int64_t h, int64_t qi) {
  const int64_t bi = h / g.a, j = h - bi * g.a;
  return uint64_t(
      (((g.sample0 + bi) * g.a_global + g.head0 + j) * g.s_global + g.q_pos0 + qi) * g.s_global +
      g.k_pos0);
}

// Bit j (j < n <= 32) set when dropout keeps the element of global index
// first + j (RngStream::uniform >= p, as attn::dropout_mult); one Philox
// block per four consecutive indices.
__device__ __noinline__ uint32_t keep_bits(uint64_t first, int n, uint64_t step, uint32_t k0,
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

__device__ __forceinline__ uint32_t keep_mask(const Args& g, uint64_t first, int n) {
  return keep_bits(first, n, g.step, g.k0, g.k1, g.p);
}

__device__ __forceinline__ int clamp_int(int64_t x, int hi) {
  return x < 0 ? 0 : x > hi ? hi : int(x);
}

// ---------------------------------------------------------------- forward

template <int D>
__host__ __device__ constexpr Layout<D> forward_layout() { return Layout<D>{3, 1, 1}; }  // q, k, v; S; P

// ctx, lse [=] of one (query tile, head); grid: n_tiles · bh blocks, the
// last (heaviest) query tiles of every head first.
template <int D>
__global__ void __launch_bounds__(kTcThreads, D == 64 ? 3 : 2)
    tc_forward_kernel(float* ctx, float* lse, Operand q, Operand k, Operand v, Args g,
                      int64_t n_tiles, int64_t bh) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr Layout<D> L = forward_layout<D>();
  constexpr int kLdT = D + 8;
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + kTile * kLdT;
  bf16* Vs = Ks + kTile * kLdT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpScratch w = warp_scratch(smem, L, warp);
  float* S = w.f32;   // (16, kLdS) scores of the warp's rows
  bf16* P = w.b16;    // (16, kLdP) bf16 probabilities

  const int64_t tile = n_tiles - 1 - int64_t(blockIdx.x) / bh;
  const int64_t h = int64_t(blockIdx.x) % bh;
  const int64_t q0 = tile * kTile;
  const int64_t q_off = h * g.s * D, k_off = h * g.sk * D;
  load_tile<D>(Qs, q, q_off, q0, g.s);

  int row_of[FragC::num_elements];
  accumulator_rows(row_of, S, lane);
  // Element passes: lane = 2 r + half owns row r, columns [32 half, 32 half + 32),
  // visited from a rotated start (rot) so the 32 lanes hit 32 banks of S.
  const int r = lane >> 1, half = lane & 1, rot = ((r >> 3) << 1) + half;
  const int64_t qi = q0 + warp * kStrip + r;
  const int64_t nk = qi < g.s ? attn::visible(g, qi) : 0;
  const uint64_t drop_base = g.dropout && qi < g.s ? drop_row_base(g, h, qi) : 0;
  const float sl2 = g.scale * kLog2e;
  float m = -INFINITY, l = 0.f;  // running max (log2 units) and sum of the row
  FragC o[D / 16];
#pragma unroll
  for (int f = 0; f < D / 16; ++f) wmma::fill_fragment(o[f], 0.f);

  const int64_t q_last = (q0 + kTile < g.s ? q0 + kTile : g.s) - 1;
  const int64_t kv_end = attn::visible(g, q_last);  // keys any row of the block sees
  for (int64_t kt = 0; kt < kv_end; kt += kTile) {
    __syncthreads();  // the previous K, V are consumed (and Qs is loaded)
    load_tile<D>(Ks, k, k_off, kt, g.sk);
    load_tile<D>(Vs, v, k_off, kt, g.sk);
    __syncthreads();
    strip_times_tile_t<D>(S, Qs + warp * kStrip * kLdT, Ks);
    __syncwarp();
    const int64_t key0 = kt + 32 * half;  // the lane's first key
    const int lim = clamp_int(nk - key0, 32);  // its keys [key0, key0 + lim) are visible
    const uint32_t keep = g.dropout && lim > 0 ? keep_mask(g, drop_base + uint64_t(key0), lim) : 0u;
    const float* srow = S + r * kLdS + 32 * half;
    bf16* prow = P + r * kLdP + 32 * half;
    float mx = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < 32; ++c) {
      const int cw = (c + rot) & 31;
      if (cw < lim) mx = fmaxf(mx, srow[cw]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)) * sl2;  // sl2 > 0: max commutes
    const float m_new = fmaxf(m, mx);
    const float base = m_new == -INFINITY ? 0.f : m_new;  // no key yet: every p is 0
    const float corr = exp2f(m - base);                   // 0 while m is -inf
    float sum = 0.f;
#pragma unroll 8
    for (int c = 0; c < 32; ++c) {
      const int cw = (c + rot) & 31;
      const float p = cw < lim ? exp2f(fmaf(srow[cw], sl2, -base)) : 0.f;
      sum += p;
      const float mult = g.dropout ? ((keep >> cw) & 1u ? g.keep_scale : 0.f) : 1.f;
      prow[cw] = __float2bfloat16_rn(p * mult);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * corr + sum;
    m = m_new;
    if (half == 0) w.rowv[r] = corr;
    __syncwarp();
    // O = O · corr (per row) + P · V
#pragma unroll
    for (int f = 0; f < D / 16; ++f)
#pragma unroll
      for (int i = 0; i < FragC::num_elements; ++i) o[f].x[i] *= w.rowv[row_of[i]];
    strip_times_tile<D>(o, P, Vs);
    __syncwarp();  // P and rowv are rewritten by the next tile
  }
  if (half == 0) {
    w.rowv[r] = l > 0.f ? 1.f / l : 0.f;  // a row that sees no key: ctx 0
    if (qi < g.s) lse[h * g.s + qi] = l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY;
  }
  __syncwarp();
#pragma unroll
  for (int f = 0; f < D / 16; ++f)
#pragma unroll
    for (int i = 0; i < FragC::num_elements; ++i) o[f].x[i] *= w.rowv[row_of[i]];
  write_strip<D>(ctx, q_off, q0 + warp * kStrip, g.s, o, w.f32, lane);
}

// ---------------------------------------------------------------- backward

template <int D>
__host__ __device__ constexpr Layout<D> dq_layout() { return Layout<D>{4, 2, 1}; }  // q, dO, k, v; S, dP; dS
template <int D>
__host__ __device__ constexpr Layout<D> dkdv_layout() { return Layout<D>{4, 2, 2}; }  // k, v, q, dO; Sᵀ, dPᵀ; P, dS

// dq [=] of one (query tile, head), the heaviest tiles first. OWN_D: first
// the rows' D = Σ_j P_j dP̃_j (dP̃ = m·dP), stored into dsum; else D from dsum.
template <int D, bool OWN_D>
__global__ void __launch_bounds__(kTcThreads, D == 64 ? 3 : 2)
    tc_dq_kernel(float* dq, float* dsum, const float* dctx, Operand q, Operand k, Operand v,
                 const float* lse, Args g, int64_t n_tiles, int64_t bh) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr Layout<D> L = dq_layout<D>();
  constexpr int kLdT = D + 8;
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* dOs = Qs + kTile * kLdT;
  bf16* Ks = dOs + kTile * kLdT;
  bf16* Vs = Ks + kTile * kLdT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpScratch w = warp_scratch(smem, L, warp);
  float* S = w.f32;                  // (16, kLdS)
  float* dP = w.f32 + kStrip * kLdS; // (16, kLdS)
  bf16* dS = w.b16;                  // (16, kLdP): dS·scale in bf16

  const int64_t tile = n_tiles - 1 - int64_t(blockIdx.x) / bh;
  const int64_t h = int64_t(blockIdx.x) % bh;
  const int64_t q0 = tile * kTile;
  const int64_t q_off = h * g.s * D, k_off = h * g.sk * D;
  load_tile<D>(Qs, q, q_off, q0, g.s);
  load_tile<D>(dOs, Operand{dctx, nullptr}, q_off, q0, g.s);

  const int r = lane >> 1, half = lane & 1, rot = ((r >> 3) << 1) + half;
  const int64_t qi = q0 + warp * kStrip + r;
  const int64_t nk = qi < g.s ? attn::visible(g, qi) : 0;
  const float lse2 = nk > 0 ? lse[h * g.s + qi] * kLog2e : 0.f;
  float Drow = !OWN_D && nk > 0 ? dsum[h * g.s + qi] : 0.f;
  const uint64_t drop_base = g.dropout && qi < g.s ? drop_row_base(g, h, qi) : 0;
  const float sl2 = g.scale * kLog2e;
  const int64_t q_last = (q0 + kTile < g.s ? q0 + kTile : g.s) - 1;
  const int64_t kv_end = attn::visible(g, q_last);
  const bf16* Qw = Qs + warp * kStrip * kLdT;
  const bf16* dOw = dOs + warp * kStrip * kLdT;

  if (OWN_D) {
    float part = 0.f;
    for (int64_t kt = 0; kt < kv_end; kt += kTile) {
      __syncthreads();
      load_tile<D>(Ks, k, k_off, kt, g.sk);
      load_tile<D>(Vs, v, k_off, kt, g.sk);
      __syncthreads();
      strip_times_tile_t<D>(S, Qw, Ks);
      strip_times_tile_t<D>(dP, dOw, Vs);
      __syncwarp();
      const int64_t key0 = kt + 32 * half;
      const int lim = clamp_int(nk - key0, 32);
      const uint32_t keep =
          g.dropout && lim > 0 ? keep_mask(g, drop_base + uint64_t(key0), lim) : 0u;
      const float* srow = S + r * kLdS + 32 * half;
      const float* dprow = dP + r * kLdS + 32 * half;
#pragma unroll 8
      for (int c = 0; c < 32; ++c) {
        const int cw = (c + rot) & 31;
        if (cw < lim) {
          const float p = exp2f(fmaf(srow[cw], sl2, -lse2));
          const float mult = g.dropout ? ((keep >> cw) & 1u ? g.keep_scale : 0.f) : 1.f;
          part = fmaf(p, dprow[cw] * mult, part);
        }
      }
      __syncwarp();
    }
    Drow = part + __shfl_xor_sync(0xffffffffu, part, 1);
    if (half == 0 && qi < g.s) dsum[h * g.s + qi] = Drow;
  }

  FragC acc[D / 16];
#pragma unroll
  for (int f = 0; f < D / 16; ++f) wmma::fill_fragment(acc[f], 0.f);
  for (int64_t kt = 0; kt < kv_end; kt += kTile) {
    __syncthreads();
    load_tile<D>(Ks, k, k_off, kt, g.sk);
    load_tile<D>(Vs, v, k_off, kt, g.sk);
    __syncthreads();
    strip_times_tile_t<D>(S, Qw, Ks);
    strip_times_tile_t<D>(dP, dOw, Vs);
    __syncwarp();
    const int64_t key0 = kt + 32 * half;
    const int lim = clamp_int(nk - key0, 32);
    const uint32_t keep =
        g.dropout && lim > 0 ? keep_mask(g, drop_base + uint64_t(key0), lim) : 0u;
    const float* srow = S + r * kLdS + 32 * half;
    const float* dprow = dP + r * kLdS + 32 * half;
    bf16* dsrow = dS + r * kLdP + 32 * half;
#pragma unroll 8
    for (int c = 0; c < 32; ++c) {
      const int cw = (c + rot) & 31;
      float ds = 0.f;
      if (cw < lim) {
        const float p = exp2f(fmaf(srow[cw], sl2, -lse2));
        const float mult = g.dropout ? ((keep >> cw) & 1u ? g.keep_scale : 0.f) : 1.f;
        ds = g.scale * p * (dprow[cw] * mult - Drow);
      }
      dsrow[cw] = __float2bfloat16_rn(ds);
    }
    __syncwarp();
    strip_times_tile<D>(acc, dS, Ks);  // dq += dS · K
    __syncwarp();
  }
  write_strip<D>(dq, q_off, q0 + warp * kStrip, g.s, acc, w.f32, lane);
}

// dk, dv [=] of one (key tile, head), the first (most seen) key tiles first.
// Lanes own query columns lane and lane + 32 of the warp's (16 keys, 64
// queries) scratch; keys no query sees get 0.
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_dkdv_kernel(float* dk, float* dv, const float* dctx, Operand q, Operand k, Operand v,
                   const float* lse, const float* dsum, Args g, int64_t n_tiles, int64_t bh) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr Layout<D> L = dkdv_layout<D>();
  constexpr int kLdT = D + 8;
  bf16* Ks = reinterpret_cast<bf16*>(smem);
  bf16* Vs = Ks + kTile * kLdT;
  bf16* Qs = Vs + kTile * kLdT;
  bf16* dOs = Qs + kTile * kLdT;
  float* lse_s = reinterpret_cast<float*>(smem + L.rows_at());  // (kTile) lse · log2 e
  float* D_s = lse_s + kTile;                                  // (kTile) D
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpScratch w = warp_scratch(smem, L, warp);
  float* St = w.f32;                   // (16 keys, kLdS queries)
  float* dPt = w.f32 + kStrip * kLdS;  // (16, kLdS)
  bf16* Pt = w.b16;                    // (16, kLdP): m·P in bf16
  bf16* dSt = w.b16 + kStrip * kLdP;   // (16, kLdP): dS·scale in bf16

  const int64_t tile = int64_t(blockIdx.x) / bh;
  const int64_t h = int64_t(blockIdx.x) % bh;
  const int64_t k0 = tile * kTile;
  const int64_t kw = k0 + warp * kStrip;  // the warp's first key
  const int64_t q_off = h * g.s * D, k_off = h * g.sk * D;
  load_tile<D>(Ks, k, k_off, k0, g.sk);
  load_tile<D>(Vs, v, k_off, k0, g.sk);
  const float sl2 = g.scale * kLog2e;
  const bf16* Kw = Ks + warp * kStrip * kLdT;
  const bf16* Vw = Vs + warp * kStrip * kLdT;

  FragC dk_acc[D / 16], dv_acc[D / 16];
#pragma unroll
  for (int f = 0; f < D / 16; ++f) {
    wmma::fill_fragment(dk_acc[f], 0.f);
    wmma::fill_fragment(dv_acc[f], 0.f);
  }
  // The first query that sees key k0: q_pos0 + qi >= k_pos0 + k0.
  const int64_t q_first = g.k_pos0 + k0 - g.q_pos0 > 0 ? g.k_pos0 + k0 - g.q_pos0 : 0;
  for (int64_t qt = q_first / kTile * kTile; qt < g.s && k0 < g.sk; qt += kTile) {
    __syncthreads();  // the previous tile's Qs, dOs, lse_s, D_s are consumed
    load_tile<D>(Qs, q, q_off, qt, g.s);
    load_tile<D>(dOs, Operand{dctx, nullptr}, q_off, qt, g.s);
    for (int i = threadIdx.x; i < kTile; i += kTcThreads) {
      const bool in = qt + i < g.s && attn::visible(g, qt + i) > 0;
      lse_s[i] = in ? lse[h * g.s + qt + i] * kLog2e : 0.f;
      D_s[i] = in ? dsum[h * g.s + qt + i] : 0.f;
    }
    __syncthreads();
    strip_times_tile_t<D>(St, Kw, Qs);   // Sᵀ = K Qᵀ
    strip_times_tile_t<D>(dPt, Vw, dOs); // dPᵀ = V dOᵀ
    __syncwarp();
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int i = lane + 32 * u;
      const int64_t qi = qt + i;
      // Keys [kw, kw + lim) of the warp are visible to query qi.
      const int lim = qi < g.s ? clamp_int(attn::visible(g, qi) - kw, kStrip) : 0;
      const uint32_t keep = g.dropout && lim > 0
                                ? keep_mask(g, drop_row_base(g, h, qi) + uint64_t(kw), lim)
                                : 0u;
      const float lse2 = lse_s[i], Dq = D_s[i];
#pragma unroll
      for (int rr = 0; rr < kStrip; ++rr) {
        float p = 0.f, ds = 0.f;
        if (rr < lim) {
          const float pr = exp2f(fmaf(St[rr * kLdS + i], sl2, -lse2));
          const float mult = g.dropout ? ((keep >> rr) & 1u ? g.keep_scale : 0.f) : 1.f;
          p = pr * mult;
          ds = g.scale * pr * (dPt[rr * kLdS + i] * mult - Dq);
        }
        Pt[rr * kLdP + i] = __float2bfloat16_rn(p);
        dSt[rr * kLdP + i] = __float2bfloat16_rn(ds);
      }
    }
    __syncwarp();
    strip_times_tile<D>(dv_acc, Pt, dOs);  // dv += (m·P)ᵀ · dO
    strip_times_tile<D>(dk_acc, dSt, Qs);  // dk += dSᵀ · Q
    __syncwarp();
  }
  write_strip<D>(dk, k_off, kw, g.sk, dk_acc, w.f32, lane);
  write_strip<D>(dv, k_off, kw, g.sk, dv_acc, w.f32, lane);
}

// ---------------------------------------------------------------- host side

// On unless a test turns it off (set_attention_tensor_cores); MT_CUDA_ATTENTION
// (attention_fa.h) chooses between the implementations.
std::atomic<bool> g_tensor_cores{true};


// One head size for q, k, v (dv == d): other shapes (multi-latent
// attention's narrower values) take the generic kernels.
bool tc_supported(const AttentionDims& dims, int64_t blocks) {
  return g_tensor_cores.load(std::memory_order_relaxed) && dims.math == MathMode::kBF16 &&
         (dims.d == 64 || dims.d == 128) && attention_dv(dims) == dims.d &&
         blocks < (int64_t(1) << 31);
}

template <int D>
void launch_forward(float* ctx, float* lse, Operand q, Operand k, Operand v, const Args& g,
                    int64_t bh) {
  const int64_t n_tiles = (g.s + kTile - 1) / kTile;
  constexpr size_t shared = forward_layout<D>().total();
  static const bool raised = (attn::allow_shared(tc_forward_kernel<D>, shared), true);
  (void)raised;
  tc_forward_kernel<D><<<unsigned(n_tiles * bh), kTcThreads, shared, stream()>>>(
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
  constexpr size_t dq_shared = dq_layout<D>().total(), dkdv_shared = dkdv_layout<D>().total();
  static const bool raised = (attn::allow_shared(tc_dq_kernel<D, true>, dq_shared),
                              attn::allow_shared(tc_dq_kernel<D, false>, dq_shared),
                              attn::allow_shared(tc_dkdv_kernel<D>, dkdv_shared), true);
  (void)raised;
  // dq first: with OWN_D it writes the D that dk, dv read.
  if (B.own_d)
    tc_dq_kernel<D, true><<<unsigned(q_tiles * B.bh), kTcThreads, dq_shared, stream()>>>(
        B.dq, B.dsum, B.dctx, B.q, B.k, B.v, B.lse, B.g, q_tiles, B.bh);
  else
    tc_dq_kernel<D, false><<<unsigned(q_tiles * B.bh), kTcThreads, dq_shared, stream()>>>(
        B.dq, B.dsum, B.dctx, B.q, B.k, B.v, B.lse, B.g, q_tiles, B.bh);
  MT_CUDA_LAUNCH_CHECK();
  tc_dkdv_kernel<D><<<unsigned(k_tiles * B.bh), kTcThreads, dkdv_shared, stream()>>>(
      B.dk, B.dv, B.dctx, B.q, B.k, B.v, B.lse, B.dsum, B.g, k_tiles, B.bh);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool set_attention_tensor_cores(bool on) { return g_tensor_cores.exchange(on); }

bool attention_tc_forward(float* ctx, float* lse, ReadView q, ReadView k, ReadView v,
                          const AttentionDims& dims, const AttentionDropout& drop) {
  const Args g = attn::make_args(dims, drop);
  const int64_t bh = dims.b * dims.a, blocks = (g.s + kTile - 1) / kTile * bh;
  if (!tc_supported(dims, blocks) || !attn::aligned16(ctx) || !attn::aligned16(q.raw()) ||
      !attn::aligned16(k.raw()) || !attn::aligned16(v.raw()))
    return false;
  const Operand oq = attn::operand(q), ok = attn::operand(k), ov = attn::operand(v);
  if (dims.d == 64)
    launch_forward<64>(ctx, lse, oq, ok, ov, g, bh);
  else
    launch_forward<128>(ctx, lse, oq, ok, ov, g, bh);
  return true;
}

bool attention_tc_backward(float* dq, float* dk, float* dv, const float* dctx, ReadView q,
                           ReadView k, ReadView v, const float* lse, const AttentionDims& dims,
                           const AttentionDropout& drop, float* workspace,
                           const float* row_dsum) {
  BackwardArgs B;
  B.g = attn::make_args(dims, drop);
  B.bh = dims.b * dims.a;
  const int64_t blocks =
      std::max((B.g.s + kTile - 1) / kTile, (B.g.sk + kTile - 1) / kTile) * B.bh;
  if (!tc_supported(dims, blocks) || !attn::aligned16(dq) || !attn::aligned16(dk) || !attn::aligned16(dv) ||
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
  // D (b, a, s): the caller's, or written there by the dq kernel.
  B.dsum = attn::dsum_buffer(row_dsum, workspace, B.bh, B.g.s, B.g.sk);
  if (dims.d == 64)
    launch_backward<64>(B);
  else
    launch_backward<128>(B);
  return true;
}

}  // namespace mt::cuda
