// Flat-buffer reductions on the GPU. sum_squares sums x_i^2 in double over a
// fixed reduction tree: min(1024, ceil(n / 256)) blocks (a function of n
// alone, never of the GPU) each take a fixed grid-stride slice and reduce it
// in shared memory in a fixed order, then one block adds the partials in the
// same way; so the result is the same bit for bit on every run (it may differ
// from the CPU's, whose order depends on its thread count, by double round-off).
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "kernels/cuda/reduce.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;     // a power of two (the tree halves it)
constexpr int kMaxBlocks = 1024;  // blocks of the first pass (partials of sum_squares)

// Scratch of fixed size, allocated on first use: kMaxBlocks partials of
// sum_squares, its result, then all_finite's flag. Never freed (process
// lifetime): it must not outlive the backend's allocation registry at exit.
constexpr size_t kScratchDoubles = kMaxBlocks + 2;
double* scratch() {
  static DeviceBuffer* buf = new DeviceBuffer(Device::kCuda, kScratchDoubles * sizeof(double));
  return buf->as<double>();
}

// Block-wide sum of one value per thread, fixed order; thread 0 gets it.
__device__ double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  return sh[0];
}

// partial[block] = sum over this block's grid-stride slice of x^2.
__global__ void sum_squares_partial(double* partial, const float* x, int64_t n) {
  __shared__ double sh[kThreads];
  double acc = 0.0;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const double v = double(x[i]);
    acc += v * v;
  }
  const double total = block_sum(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// *out = sum of partial[0, count); one block.
__global__ void sum_partials(double* out, const double* partial, int count) {
  __shared__ double sh[kThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partial[i];
  const double total = block_sum(acc, sh);
  if (threadIdx.x == 0) *out = total;
}

__global__ void scale_kernel(float* x, int64_t n, float alpha) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= alpha;
}

// *bad = 1 if some element is NaN or +-Inf (exponent bits all ones, as reduce.cc).
__global__ void finite_kernel(int* bad, const float* x, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int mine = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    mine |= int((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u);
  if (__syncthreads_or(mine) && threadIdx.x == 0) *bad = 1;  // every writer writes 1
}

}  // namespace

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const int blocks = int(std::min<int64_t>(kMaxBlocks, blocks_for(n, kThreads)));
  double* partial = scratch();
  double* result = partial + kMaxBlocks;
  sum_squares_partial<<<blocks, kThreads, 0, stream()>>>(partial, x, n);
  MT_CUDA_LAUNCH_CHECK();
  sum_partials<<<1, kThreads, 0, stream()>>>(result, partial, blocks);
  MT_CUDA_LAUNCH_CHECK();
  double total = 0.0;
  copy_bytes(&total, result, sizeof total);  // waits for the GPU
  return total;
}

// x (n) *= alpha
void scale_inplace(float* x, int64_t n, float alpha) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x, n, alpha);
  MT_CUDA_LAUNCH_CHECK();
}

bool all_finite(const float* x, int64_t n) {
  if (n <= 0) return true;
  const int blocks = int(std::min<int64_t>(kMaxBlocks, blocks_for(n, kThreads)));
  int* bad = reinterpret_cast<int*>(scratch() + kMaxBlocks + 1);
  MT_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), stream()));
  finite_kernel<<<blocks, kThreads, 0, stream()>>>(bad, x, n);
  MT_CUDA_LAUNCH_CHECK();
  int host_bad = 0;
  copy_bytes(&host_bad, bad, sizeof host_bad);  // waits for the GPU
  return host_bad == 0;
}

}  // namespace mt::cuda
