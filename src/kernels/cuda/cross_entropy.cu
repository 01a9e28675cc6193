// Softmax cross-entropy on the GPU, the function of cross_entropy.cc: one
// block per row for every phase. The sum of exponentials is taken as the CPU
// takes it, in double over fp32 exponentials: each thread adds its strided
// columns in double, then a fixed warp-shuffle tree in double, so losses agree
// with the CPU to ~1e-7 relative (CUDA's expf and the CPU's exp_f32 differ by a
// few ulp). The phases and the fused cross_entropy_rows run the same device
// functions with the same block size, so they give the same bits, as on the CPU.
//
// check_targets reads the targets on the GPU: one block finds the first bad
// row (a fixed reduction) and the host reads it back (a synchronisation) to
// raise the CPU's error. Targets on the host are copied to the GPU.
#include "kernels/cuda/cross_entropy.h"

#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/device_math.cuh"

namespace mt::cuda {

namespace {

// Threads of a row block; a function of the row length only, so the fused
// rows and the phases (same v) reduce in the same order.
int row_threads(int64_t v) { return v >= 4096 ? 512 : 256; }

// Grow-only scratch (reused across calls): `bytes` of GPU memory.
char* grown(DeviceBuffer& buf, size_t bytes) {
  if (buf.size() < bytes) buf = DeviceBuffer(Device::kCuda, bytes);
  return buf.data();
}

// Targets on the GPU: the caller's, or a copy of host targets.
const int32_t* gpu_targets(const int32_t* targets, int64_t n) {
  if (n == 0 || on_device(targets)) return targets;
  static DeviceBuffer staged;
  auto* dst = reinterpret_cast<int32_t*>(grown(staged, size_t(n) * sizeof(int32_t)));
  copy_bytes(dst, targets, size_t(n) * sizeof(int32_t));
  return dst;
}

// Reductions over the block (blockDim.x a multiple of 32); every thread gets
// the same bits (a xor butterfly combines the same two values in every lane).
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ float block_max(float x) {
  __shared__ float part[32];
  x = warp_max(x);
  __syncthreads();  // an earlier call's readers are done with part
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_max(lane < int(blockDim.x >> 5) ? part[lane] : -INFINITY);
}
__device__ double block_sum(double x) {
  __shared__ double part[32];
  x = warp_sum(x);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  return warp_sum(lane < int(blockDim.x >> 5) ? part[lane] : 0.0);
}

// One row's steps, by the whole block (cross_entropy.cc's row functions).
// Thread t takes columns t, t + blockDim.x, ... in every step, so an
// exponential it keeps in z is read back by the same thread.

__device__ float row_max(const float* z, int64_t v) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) mx = fmaxf(mx, z[j]);
  return block_max(mx);
}

// sum_exp = Σ_j exp(z_j - mx); target_logit = z_t - mx (0 when t is outside the
// row); with keep_exp, z_j = exp(z_j - mx). Both results in every thread.
__device__ void row_sums(double& sum_exp, double& target_logit, float* z, float mx, int64_t t,
                         int64_t v, bool keep_exp) {
  __shared__ float z_t;  // written by t's thread before keep_exp replaces it
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float zj = z[j];
    if (j == t) z_t = zj;
    const float e = expf(zj - mx);
    if (keep_exp) z[j] = e;
    sum += double(e);
  }
  sum_exp = block_sum(sum);  // its barriers publish z_t
  target_logit = (t >= 0 && t < v) ? double(z_t - mx) : 0.0;
}

// loss = log(sum_exp) - target_logit; if grad_scale != 0:
// g_j = grad_scale * (e_j / sum_exp - [j == t]), g may be z (fp32, in place:
// each thread reads its z_j before writing its g_j) or bf16 storage. e_j is
// z_j (the kept exponential), or with recompute exp(z_j - mx) (the same bits
// as row_sums kept). The _rn intrinsics keep the CPU's two roundings (no
// fused multiply-add).
template <class T>
__device__ void row_finish(float* loss, T* g, const float* z, double sum_exp,
                           double target_logit, int64_t t, int64_t v, float grad_scale,
                           bool recompute, float mx) {
  if (threadIdx.x == 0) *loss = float(log(sum_exp) - target_logit);
  if (grad_scale == 0.f) return;
  const float mul = float(double(grad_scale) / sum_exp);
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float e = recompute ? expf(z[j] - mx) : z[j];
    const float p = __fmul_rn(e, mul);
    st_f32(g, j, j == t ? __fsub_rn(p, grad_scale) : p);
  }
}

__global__ void max_kernel(float* row_max_out, const float* logits, int64_t v) {
  const int64_t i = blockIdx.x;
  const float mx = row_max(logits + i * v, v);
  if (threadIdx.x == 0) row_max_out[i] = mx;
}

__global__ void sums_kernel(double* sum_exp, double* target_logit, float* logits,
                            const float* row_max_in, const int32_t* targets, int64_t v,
                            int64_t v_start, bool keep_exp) {
  const int64_t i = blockIdx.x;
  double sum = 0.0, target = 0.0;
  row_sums(sum, target, logits + i * v, row_max_in[i], int64_t(targets[i]) - v_start, v,
           keep_exp);
  if (threadIdx.x == 0) {
    sum_exp[i] = sum;
    target_logit[i] = target;
  }
}

template <class T>
__global__ void finish_kernel(float* losses, T* grad, const float* logits, const double* sum_exp,
                              const double* target_logit, const int32_t* targets, int64_t v,
                              int64_t v_start, float grad_scale) {
  const int64_t i = blockIdx.x;
  row_finish(losses + i, grad_scale != 0.f ? grad + i * v : grad, logits + i * v, sum_exp[i],
             target_logit[i], int64_t(targets[i]) - v_start, v, grad_scale, false, 0.f);
}

// The fused row. With the gradient in place (grad == logits) the exponentials
// are not stored between the passes but computed again (one write of the row
// fewer); the logits end as the gradient either way.
template <class T>
__global__ void rows_kernel(float* losses, float* logits, T* grad, const int32_t* targets,
                            int64_t v, float grad_scale) {
  const int64_t i = blockIdx.x;
  float* z = logits + i * v;
  const int64_t t = targets[i];
  const bool in_place = static_cast<const void*>(grad) == static_cast<const void*>(logits);
  const bool has_grad = grad_scale != 0.f;
  const float mx = row_max(z, v);
  double sum = 0.0, target = 0.0;
  row_sums(sum, target, z, mx, t, v, has_grad && !in_place);
  row_finish(losses + i, has_grad ? grad + i * v : grad, z, sum, target, t, v, grad_scale,
             in_place, mx);
}

// found[0] = the first row whose target is outside [0, v) (n if none), found[1]
// its target. One block; each thread's first hit is its smallest, then a min.
__global__ void first_bad_kernel(long long* found, const int32_t* targets, int64_t n,
                                 int64_t v) {
  __shared__ long long part[32];
  long long first = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (targets[i] < 0 || targets[i] >= v) {
      first = i;
      break;
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = first;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w) first = min(first, part[w]);
    found[0] = first;
    found[1] = first < n ? targets[first] : 0;
  }
}

void check_rows(int64_t n) {
  MT_CHECK(n <= INT_MAX, "cross-entropy (cuda): n=", n,
           " rows are above the GPU kernel's 2^31 - 1; fix: a smaller batch, or --device cpu");
}

}  // namespace

// row_max (n) = max over the shard's columns                          [=]
void cross_entropy_shard_max(float* row_max_out, const float* logits, int64_t n,
                             int64_t v_local) {
  if (n <= 0) return;
  check_rows(n);
  max_kernel<<<unsigned(n), row_threads(v_local), 0, stream()>>>(row_max_out, logits, v_local);
  MT_CUDA_LAUNCH_CHECK();
}

// sum_exp (n) =, target_logit (n) =; with keep_exp logits = exp(logits - row_max)
void cross_entropy_shard_sums(double* sum_exp, double* target_logit, float* logits,
                              const float* row_max_in, const int32_t* targets, int64_t n,
                              int64_t v_local, int64_t v_start, bool keep_exp) {
  if (n <= 0) return;
  check_rows(n);
  const int32_t* t = gpu_targets(targets, n);
  sums_kernel<<<unsigned(n), row_threads(v_local), 0, stream()>>>(
      sum_exp, target_logit, logits, row_max_in, t, v_local, v_start, keep_exp);
  MT_CUDA_LAUNCH_CHECK();
}

// losses (n) =; grad (n, v_local) = grad_scale * (softmax - onehot) when grad_scale != 0
void cross_entropy_shard_finish(float* losses, WriteView grad, const float* logits,
                                const double* sum_exp, const double* target_logit,
                                const int32_t* targets, int64_t n, int64_t v_local,
                                int64_t v_start, float grad_scale) {
  if (n <= 0) return;
  check_rows(n);
  const int32_t* t = gpu_targets(targets, n);
  visit(grad, [&](auto* g) {
    finish_kernel<<<unsigned(n), row_threads(v_local), 0, stream()>>>(
        losses, g, logits, sum_exp, target_logit, t, v_local, v_start, grad_scale);
  });
  MT_CUDA_LAUNCH_CHECK();
}

// losses (n) =; logits (n, v) = exponentials and grad (n, v) = when grad_scale != 0
void cross_entropy_rows(float* losses, float* logits, WriteView grad, const int32_t* targets,
                        int64_t n, int64_t v, float grad_scale) {
  if (n <= 0) return;
  check_rows(n);
  const int32_t* t = gpu_targets(targets, n);
  visit(grad, [&](auto* g) {
    rows_kernel<<<unsigned(n), row_threads(v), 0, stream()>>>(losses, logits, g, t, v,
                                                              grad_scale);
  });
  MT_CUDA_LAUNCH_CHECK();
}

// Checks every target is in [0, v); the error names the id, row and v (the first bad row).
void check_targets(const int32_t* targets, int64_t n, int64_t v) {
  if (n <= 0) return;
  const int32_t* t = gpu_targets(targets, n);
  static DeviceBuffer flag;
  auto* found = reinterpret_cast<long long*>(grown(flag, 2 * sizeof(long long)));
  first_bad_kernel<<<1, 1024, 0, stream()>>>(found, t, n, v);
  MT_CUDA_LAUNCH_CHECK();
  long long host[2] = {0, 0};
  copy_bytes(host, found, sizeof host);  // waits for the kernel
  const int64_t i = host[0];
  MT_CHECK(i >= n, "cross-entropy: target id ", int32_t(host[1]), " at row ", i,
           " is outside [0, ", v,
           "); fix: check the dataset's token ids against the model's vocab size");
}

// losses (n) = -log softmax(logits)[target]; logits = the gradient in place when grad_scale != 0
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale) {
  MT_CHECK(n >= 0 && v > 0, "softmax_cross_entropy: bad shape n=", n, " v=", v,
           "; fix: pass the row count and a positive vocabulary size");
  const int32_t* t = gpu_targets(targets, n);
  check_targets(t, n, v);
  cross_entropy_rows(losses, logits, logits, t, n, v, grad_scale);
}

}  // namespace mt::cuda
