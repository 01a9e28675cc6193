// Device helpers shared by the attention kernels (attention.cu forward,
// attention_backward.cu): the resolved sizes, operand loads with the math
// mode's rounding, the dropout mask (a device copy of RngStream::uniform, bit
// for bit) and warp reductions. The kernels tile queries and keys through
// shared memory with padded rows (stride d + 1, so a lane walking down a
// column of a tile hits its own bank; v and ctx rows dv + 1).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "kernels/attention.h"

namespace mt::cuda::attn {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kRowsPerWarp = 4;         // query rows (or keys) a warp owns
constexpr int kMaxChunks = 4;           // head dim up to 32 * kMaxChunks = 128
constexpr int kMaxHeadDim = 32 * kMaxChunks;

// Sizes, positions and dropout of one call, by value into every kernel.
struct Args {
  int64_t a, s, sk, d;       // local heads, queries, keys, q/k head dim
  int64_t dv;                // v and ctx head dim
  int64_t q_pos0, k_pos0;    // global positions of the first query and key
  float scale;               // 1 / sqrt(d)
  int math;                  // MathMode: operands rounded to bf16 (1) or fp16 (2)
  int dropout;               // p > 0
  float p, keep_scale;       // drop when uniform < p; kept values times 1 / (1 - p)
  uint32_t k0, k1;           // Philox key
  uint64_t step;             // Philox counter words 2, 3
  int64_t sample0, a_global, head0, s_global;  // of the global dropout index
};

inline Args make_args(const AttentionDims& dims, const AttentionDropout& drop) {
  Args g;
  g.a = dims.a;
  g.s = dims.s;
  g.sk = dims.sk > 0 ? dims.sk : dims.s;
  g.d = dims.d;
  g.dv = attention_dv(dims);
  g.q_pos0 = dims.q_pos0;
  g.k_pos0 = dims.k_pos0;
  g.scale = 1.f / std::sqrt(float(dims.d));
  g.math = int(dims.math);
  g.dropout = drop.p > 0.f;
  g.p = drop.p;
  g.keep_scale = drop.p > 0.f ? 1.f / (1.f - drop.p) : 1.f;
  g.k0 = drop.rng.k0;
  g.k1 = drop.rng.k1;
  g.step = drop.rng.step;
  g.sample0 = drop.sample0;
  g.a_global = drop.a_global > 0 ? drop.a_global : dims.a;
  g.head0 = drop.head0;
  g.s_global = dims.s_global > 0 ? dims.s_global : dims.s;
  return g;
}

// An input as the kernels read it: fp32 or bf16 storage (one pointer set).
struct Operand {
  const float* f32;
  const uint16_t* bf16;
  __device__ float load(int64_t i) const {
    return bf16 ? __uint_as_float(uint32_t(bf16[i]) << 16) : f32[i];
  }
};
inline Operand operand(ReadView x) { return Operand{x.f32, x.bf16}; }

// x as the matmul of the math mode sees it: itself (fp32), or rounded to the
// nearest bf16 / fp16 (ties to even, as bf16_from_f32 and f16_round).
__device__ __forceinline__ float round_operand(float x, int math) {
  if (math == int(MathMode::kBF16)) return __bfloat162float(__float2bfloat16_rn(x));
  if (math == int(MathMode::kF16)) return __half2float(__float2half_rn(x));
  return x;
}

// Keys [0, visible(qi)) of the call are visible to local query qi.
__device__ __forceinline__ int64_t visible(const Args& g, int64_t qi) {
  const int64_t n = g.q_pos0 + qi - g.k_pos0 + 1;
  return n < 0 ? 0 : n > g.sk ? g.sk : n;
}

// Philox4x32-10 block `block` (counter words 0, 1; `step` words 2, 3): the
// same four numbers as RngStream::block of core/rng.h.
__device__ __forceinline__ uint4 philox_block(uint64_t block, uint64_t step, uint32_t k0,
                                              uint32_t k1) {
  uint32_t c0 = uint32_t(block), c1 = uint32_t(block >> 32);
  uint32_t c2 = uint32_t(step), c3 = uint32_t(step >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return make_uint4(c0, c1, c2, c3);
}

// Word `w` of that block.
__device__ __forceinline__ uint32_t philox_word(uint64_t block, uint64_t step, uint32_t k0,
                                                uint32_t k1, int w) {
  const uint4 r = philox_block(block, step, k0, k1);
  return w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
}

// Dropout multiplier of probability (head h, local query qi, local key kj):
// keep_scale when RngStream::uniform of its global index is >= p, else 0.
__device__ __forceinline__ float dropout_mult(const Args& g, int64_t h, int64_t qi, int64_t kj) {
  const int64_t bi = h / g.a, j = h - bi * g.a;
  const uint64_t index = uint64_t(
      (((g.sample0 + bi) * g.a_global + g.head0 + j) * g.s_global + g.q_pos0 + qi) * g.s_global +
      g.k_pos0 + kj);
  const uint32_t word = philox_word(index >> 2, g.step, g.k0, g.k1, int(index & 3));
  const float u = float(word >> 8) * (1.0f / 16777216.0f);
  return u >= g.p ? g.keep_scale : 0.f;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// dst[r][t] (stride ld) = rounded src row (row0 + r) of `head` (rows of d),
// 0 past n_rows; r < rows. All threads of the block take part.
__device__ __forceinline__ void load_rows(float* dst, int ld, Operand src, int64_t head_off,
                                          int64_t row0, int rows, int64_t n_rows, int d,
                                          int math) {
  for (int i = threadIdx.x; i < rows * d; i += blockDim.x) {
    const int r = i / d, t = i - r * d;
    const int64_t row = row0 + r;
    dst[r * ld + t] = row < n_rows ? round_operand(src.load(head_off + row * d + t), math) : 0.f;
  }
}

// Chunks of 32 head-dim columns a lane covers: 1..4 (d <= 128); of a call,
// enough for both head sizes (the kernels guard each against its own).
inline int chunks_for(int64_t d) { return int((d + 31) / 32); }
inline int chunks_for(const AttentionDims& dims) {
  return chunks_for(std::max(dims.d, attention_dv(dims)));
}

// Raises a kernel's dynamic shared memory limit to `bytes` (above the default
// 48 KB; the H100 allows 227 KB) before its launch.
template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(bytes)));
}

// Host side of every implementation's entry point: 16-byte alignment (the
// tensor-core kernels' vector loads), and where backward's D (b·a·s floats)
// goes: the caller's row_dsum, else the workspace when its first part —
// (b·a, min(s, 128), sk) floats in attention.cc's layout — holds it, else a
// grow-only scratch shared by the implementations.
inline bool aligned16(const void* p) {
  return p != nullptr && (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}
inline float* dsum_buffer(const float* row_dsum, float* workspace, int64_t bh, int64_t s,
                          int64_t sk) {
  if (row_dsum != nullptr) return const_cast<float*>(row_dsum);
  const int64_t rows = bh * s;
  if (workspace != nullptr && rows <= bh * std::min<int64_t>(kAttentionBlockQ, s) * sk)
    return workspace;
  static DeviceBuffer scratch;
  const size_t bytes = size_t(rows) * sizeof(float);
  if (scratch.size() < bytes) scratch = DeviceBuffer(Device::kCuda, bytes);
  return scratch.as<float>();
}

}  // namespace mt::cuda::attn
