// LayerNorm on the GPU, the function of layernorm.cc: biased variance in two
// passes (mean, then centred squares), fp32 statistics, fp32 / bf16 storage of
// input, weight, bias and output independently.
//
// Forward and dinp: one block per row; the row sums are per-thread strided
// partial sums, then a fixed warp-shuffle tree (deterministic; the order
// differs from the CPU's simd order, so results agree to fp32 round-off).
// dweight / dbias: column sums over the n rows in two deterministic passes, no
// atomics: blocks of 32 columns x 8 row lanes sum chunks of rows into scratch
// (one partial per chunk and column), then a block of 32 columns x 16 chunk
// lanes adds the partials in double (each lane its chunks in order, then a
// fixed tree), as the CPU sums rows in double.
// Predicted (n=8192, c=768, fp32 input): the finish reads 128 x 768 partials
// (0.4 MB) with 24 blocks of 8 loads per thread: ~3 us per call, launch-bound
// (was 33 us: 3 blocks, 128 serial loads per thread); the partial pass reads
// dout and inp (50 MB): ~17 us at 2.9 TB/s, unchanged.
#include "kernels/cuda/layernorm.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/norm_grad.cuh"

namespace mt::cuda {

namespace {

using namespace norm;

// One block per row: out = (x - mean) * rstd * weight + bias. out may be inp
// (each thread writes only the columns it read, after the statistics).
template <class To, class Ti, class W, class B>
__global__ void forward_kernel(To* out, float* mean, float* rstd, const Ti* inp, const W* weight,
                               const B* bias, int64_t c, float eps, float w1) {
  const int64_t i = blockIdx.x;
  const Ti* x = inp + i * c;
  To* y = out + i * c;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sum += ld_f32(x, j);
  const float m = block_sum(sum) / float(c);
  float sq = 0.f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float d = ld_f32(x, j) - m;
    sq += d * d;
  }
  const float r = 1.f / sqrtf(block_sum(sq) / float(c) + eps);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    st_f32(y, j, (ld_f32(x, j) - m) * r * (ld_f32(weight, j) + w1) + ld_f32(bias, j));
  if (threadIdx.x == 0) {
    mean[i] = m;
    rstd[i] = r;
  }
}

// One block per row: with xhat = (x - mean) * rstd and g = dout * weight,
// dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)).
template <class Ti, class W>
__global__ void dinp_kernel(float* dinp, const float* dout, const Ti* inp, const W* weight,
                            const float* mean, const float* rstd, int64_t c, float w1) {
  const int64_t i = blockIdx.x;
  const Ti* x = inp + i * c;
  const float* dy = dout + i * c;
  float* dx = dinp + i * c;
  const float m = mean[i], r = rstd[i];
  float sum_g = 0.f, sum_gx = 0.f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float g = dy[j] * (ld_f32(weight, j) + w1);
    sum_g += g;
    sum_gx += g * ((ld_f32(x, j) - m) * r);
  }
  const float mean_g = block_sum(sum_g) / float(c);
  const float mean_gx = block_sum(sum_gx) / float(c);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float xhat = (ld_f32(x, j) - m) * r;
    dx[j] += r * (dy[j] * (ld_f32(weight, j) + w1) - mean_g - xhat * mean_gx);
  }
}

// Block (kColTile, kRowLanes) of chunk blockIdx.x, columns blockIdx.y * kColTile..:
// part_w[chunk][col] = Σ dout * xhat, part_b[chunk][col] = Σ dout over the
// chunk's rows (lane y takes rows y, y + 8, ...; the lanes are added in order).
template <class Ti>
__global__ void param_partial_kernel(float* part_w, float* part_b, const float* dout,
                                     const Ti* inp, const float* mean, const float* rstd,
                                     int64_t n, int64_t c, int64_t chunk_rows) {
  __shared__ float sw[kRowLanes][kColTile], sb[kRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t chunk = blockIdx.x;
  const int64_t col = int64_t(blockIdx.y) * kColTile + tx;
  const int64_t r0 = chunk * chunk_rows, r1 = min(n, r0 + chunk_rows);
  float aw = 0.f, ab = 0.f;
  if (col < c) {
    for (int64_t i = r0 + ty; i < r1; i += kRowLanes) {
      const float dy = dout[i * c + col];
      aw += dy * ((ld_f32(inp, i * c + col) - mean[i]) * rstd[i]);
      ab += dy;
    }
  }
  sw[ty][tx] = aw;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && col < c) {
    float tw = 0.f, tb = 0.f;
#pragma unroll
    for (int k = 0; k < kRowLanes; ++k) {
      tw += sw[k][tx];
      tb += sb[k][tx];
    }
    part_w[chunk * c + col] = tw;
    part_b[chunk * c + col] = tb;
  }
}

// dweight[col] += Σ_chunks part_w, dbias[col] += Σ_chunks part_b, in double:
// block (kColTile columns, kFinishLanes chunk lanes); lane y adds chunks y,
// y + kFinishLanes, ... in order, then the lanes are added in a fixed tree
// (the same bits on every run).
__global__ void param_finish_kernel(float* dweight, float* dbias, const float* part_w,
                                    const float* part_b, int64_t chunks, int64_t c) {
  __shared__ double sw[kFinishLanes][kColTile], sb[kFinishLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kColTile + tx;
  double w = 0.0, b = 0.0;
  if (col < c) {
#pragma unroll 4
    for (int64_t k = ty; k < chunks; k += kFinishLanes) {
      w += double(part_w[k * c + col]);
      b += double(part_b[k * c + col]);
    }
  }
  sw[ty][tx] = w;
  sb[ty][tx] = b;
  for (int h = kFinishLanes / 2; h > 0; h >>= 1) {
    __syncthreads();  // lanes [h, 2h) wrote their sums
    if (ty < h) {
      sw[ty][tx] += sw[ty + h][tx];
      sb[ty][tx] += sb[ty + h][tx];
    }
  }
  if (ty == 0 && col < c) {
    dweight[col] += float(sw[0][tx]);
    dbias[col] += float(sb[0][tx]);
  }
}

}  // namespace

// out (n, c) =, mean (n) =, rstd (n) =
void layernorm_forward(WriteView out, float* mean, float* rstd, ReadView inp, ReadView weight,
                       ReadView bias, int64_t n, int64_t c, float eps,
                       bool zero_centered_gamma) {
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(out && inp && weight && bias, "layernorm_forward: null output, input, weight or bias");
  MT_CHECK(n >= 0 && c > 0, "layernorm_forward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  MT_CHECK(eps > 0.f, "layernorm_forward: eps=", eps, " must be > 0; fix: use e.g. 1e-5");
  if (n == 0) return;
  const int threads = row_threads(c);
  visit(out, [&](auto* y) {
    visit(inp, [&](const auto* x) {
      visit(weight, [&](const auto* w) {
        visit(bias, [&](const auto* b) {
          forward_kernel<<<unsigned(n), threads, 0, stream()>>>(y, mean, rstd, x, w, b, c, eps, w1);
        });
      });
    });
  });
  MT_CUDA_LAUNCH_CHECK();
}

// dinp (n, c) +=, dweight (c) +=, dbias (c) +=
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        ReadView inp, ReadView weight, const float* mean,
                        const float* rstd, int64_t n, int64_t c,
                        bool zero_centered_gamma) {
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(inp && weight, "layernorm_backward: null input or weight");
  MT_CHECK(n >= 0 && c > 0, "layernorm_backward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  if (n == 0) return;
  const int64_t col_tiles = (c + kColTile - 1) / kColTile;
  MT_CHECK(col_tiles <= 65535, "layernorm_backward (cuda): hidden size c=", c,
           " is above the GPU kernel's ", 65535 * kColTile, "; fix: --device cpu");
  const int threads = row_threads(c);
  visit(inp, [&](const auto* x) {
    visit(weight, [&](const auto* w) {
      dinp_kernel<<<unsigned(n), threads, 0, stream()>>>(dinp, dout, x, w, mean, rstd, c, w1);
    });
  });
  MT_CUDA_LAUNCH_CHECK();

  const int64_t chunk_rows = rows_per_chunk(n);
  const int64_t chunks = (n + chunk_rows - 1) / chunk_rows;
  float* part_w = partial_scratch(2 * chunks * c);
  float* part_b = part_w + chunks * c;
  const dim3 grid{unsigned(chunks), unsigned(col_tiles)}, block{kColTile, kRowLanes};
  visit(inp, [&](const auto* x) {
    param_partial_kernel<<<grid, block, 0, stream()>>>(part_w, part_b, dout, x, mean, rstd, n, c,
                                                       chunk_rows);
  });
  MT_CUDA_LAUNCH_CHECK();
  param_finish_kernel<<<unsigned(col_tiles), dim3(kColTile, kFinishLanes), 0, stream()>>>(
      dweight, dbias, part_w, part_b, chunks, c);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
