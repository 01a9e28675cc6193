// RMSNorm on the GPU, the function of rmsnorm.cc: y = x * rstd * w with
// rstd = 1 / sqrt(mean(x^2) + eps), fp32 statistics, fp32 / bf16 storage of
// input, weight and output independently.
//
// As layernorm.cu: forward and dinp one block per row (fixed reduction tree;
// fp32 round-off differs from the CPU's simd order), dweight as column sums in
// two deterministic passes without atomics (per-chunk partials into scratch,
// then blocks of 32 columns x 16 chunk lanes add them in double: each lane its
// chunks in order, then a fixed tree; the CPU sums in double too).
// Predicted (n=8192, c=768): the finish reads 0.4 MB of partials with c/32
// blocks: ~3 us per call, launch-bound (was ~30 us: 128 serial loads per
// thread in 3 blocks); the partial pass (dout + inp, 38-50 MB) is unchanged.
#include "kernels/cuda/rmsnorm.h"

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

// One block per row: out = x * rstd * weight. out may be inp (each thread
// writes only the columns it read, after the statistics).
template <class To, class Ti, class W>
__global__ void forward_kernel(To* out, float* rstd, const Ti* inp, const W* weight, int64_t c,
                               float eps, float w1) {
  const int64_t i = blockIdx.x;
  const Ti* x = inp + i * c;
  To* y = out + i * c;
  float sq = 0.f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sq += ld_f32(x, j) * ld_f32(x, j);
  const float r = 1.f / sqrtf(block_sum(sq) / float(c) + eps);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    st_f32(y, j, ld_f32(x, j) * r * (ld_f32(weight, j) + w1));
  if (threadIdx.x == 0) rstd[i] = r;
}

// One block per row: with xhat = x * rstd and g = dout * weight,
// dinp += rstd * (g - xhat * mean(g * xhat)).
template <class Ti, class W>
__global__ void dinp_kernel(float* dinp, const float* dout, const Ti* inp, const W* weight,
                            const float* rstd, int64_t c, float w1) {
  const int64_t i = blockIdx.x;
  const Ti* x = inp + i * c;
  const float* dy = dout + i * c;
  float* dx = dinp + i * c;
  const float r = rstd[i];
  float sum_gx = 0.f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    sum_gx += dy[j] * (ld_f32(weight, j) + w1) * (ld_f32(x, j) * r);
  const float mean_gx = block_sum(sum_gx) / float(c);
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    dx[j] += r * (dy[j] * (ld_f32(weight, j) + w1) - (ld_f32(x, j) * r) * mean_gx);
}

// Block (kColTile, kRowLanes) of chunk blockIdx.x, columns blockIdx.y * kColTile..:
// part[chunk][col] = Σ dout * xhat over the chunk's rows (lane y takes rows
// y, y + 8, ...; the lanes are added in order).
template <class Ti>
__global__ void param_partial_kernel(float* part, const float* dout, const Ti* inp,
                                     const float* rstd, int64_t n, int64_t c,
                                     int64_t chunk_rows) {
  __shared__ float sw[kRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t chunk = blockIdx.x;
  const int64_t col = int64_t(blockIdx.y) * kColTile + tx;
  const int64_t r0 = chunk * chunk_rows, r1 = min(n, r0 + chunk_rows);
  float aw = 0.f;
  if (col < c) {
    for (int64_t i = r0 + ty; i < r1; i += kRowLanes)
      aw += dout[i * c + col] * (ld_f32(inp, i * c + col) * rstd[i]);
  }
  sw[ty][tx] = aw;
  __syncthreads();
  if (ty == 0 && col < c) {
    float tw = 0.f;
#pragma unroll
    for (int k = 0; k < kRowLanes; ++k) tw += sw[k][tx];
    part[chunk * c + col] = tw;
  }
}

// dweight[col] += Σ_chunks part, in double: block (kColTile columns,
// kFinishLanes chunk lanes); lane y adds chunks y, y + kFinishLanes, ... in
// order, then the lanes are added in a fixed tree (the same bits on every run).
__global__ void param_finish_kernel(float* dweight, const float* part, int64_t chunks,
                                    int64_t c) {
  __shared__ double sw[kFinishLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kColTile + tx;
  double w = 0.0;
  if (col < c) {
#pragma unroll 4
    for (int64_t k = ty; k < chunks; k += kFinishLanes) w += double(part[k * c + col]);
  }
  sw[ty][tx] = w;
  for (int h = kFinishLanes / 2; h > 0; h >>= 1) {
    __syncthreads();  // lanes [h, 2h) wrote their sums
    if (ty < h) sw[ty][tx] += sw[ty + h][tx];
  }
  if (ty == 0 && col < c) dweight[col] += float(sw[0][tx]);
}

}  // namespace

// out (n, c) =, rstd (n) =
void rmsnorm_forward(WriteView out, float* rstd, ReadView inp, ReadView weight, int64_t n,
                     int64_t c, float eps, bool zero_centered_gamma) {
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(out && inp && weight, "rmsnorm_forward: null output, input or weight");
  MT_CHECK(n >= 0 && c > 0, "rmsnorm_forward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  MT_CHECK(eps > 0.f, "rmsnorm_forward: eps=", eps, " must be > 0; fix: use e.g. 1e-5");
  if (n == 0) return;
  const int threads = row_threads(c);
  visit(out, [&](auto* y) {
    visit(inp, [&](const auto* x) {
      visit(weight, [&](const auto* w) {
        forward_kernel<<<unsigned(n), threads, 0, stream()>>>(y, rstd, x, w, c, eps, w1);
      });
    });
  });
  MT_CUDA_LAUNCH_CHECK();
}

// dinp (n, c) +=, dweight (c) +=
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, ReadView inp,
                      ReadView weight, const float* rstd, int64_t n, int64_t c,
                      bool zero_centered_gamma) {
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(inp && weight, "rmsnorm_backward: null input or weight");
  MT_CHECK(n >= 0 && c > 0, "rmsnorm_backward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  if (n == 0) return;
  const int64_t col_tiles = (c + kColTile - 1) / kColTile;
  MT_CHECK(col_tiles <= 65535, "rmsnorm_backward (cuda): hidden size c=", c,
           " is above the GPU kernel's ", 65535 * kColTile, "; fix: --device cpu");
  const int threads = row_threads(c);
  visit(inp, [&](const auto* x) {
    visit(weight, [&](const auto* w) {
      dinp_kernel<<<unsigned(n), threads, 0, stream()>>>(dinp, dout, x, w, rstd, c, w1);
    });
  });
  MT_CUDA_LAUNCH_CHECK();

  const int64_t chunk_rows = rows_per_chunk(n);
  const int64_t chunks = (n + chunk_rows - 1) / chunk_rows;
  float* part = partial_scratch(chunks * c);
  const dim3 grid{unsigned(chunks), unsigned(col_tiles)}, block{kColTile, kRowLanes};
  visit(inp, [&](const auto* x) {
    param_partial_kernel<<<grid, block, 0, stream()>>>(part, dout, x, rstd, n, c, chunk_rows);
  });
  MT_CUDA_LAUNCH_CHECK();
  param_finish_kernel<<<unsigned(col_tiles), dim3(kColTile, kFinishLanes), 0, stream()>>>(
      dweight, part, chunks, c);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
