// Precision conversions on the GPU, bit for bit the CPU's (precision.h): the
// same bit algorithms for bf16 and fp16 rounding (device_math.cuh). One thread
// per element; same-storage copies are device-to-device memcpys.
#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/precision.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void f32_to_bf16_kernel(uint16_t* out, const float* in, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = bf16_of(in[i]);
}

__global__ void bf16_to_f32_kernel(float* out, const uint16_t* in, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f32_of(in[i]);
}

__global__ void round_to_f16_kernel(float* out, const float* in, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f16_round_dev(in[i]);
}

}  // namespace

// (n and the pointers are checked by the entry points, precision.cc)
void f32_to_bf16(uint16_t* out, const float* in, int64_t n) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(out, in, n);
  MT_CUDA_LAUNCH_CHECK();
}

void bf16_to_f32(float* out, const uint16_t* in, int64_t n) {
  if (n <= 0) return;
  bf16_to_f32_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(out, in, n);
  MT_CUDA_LAUNCH_CHECK();
}

void round_to_f16(float* out, const float* in, int64_t n) {
  if (n <= 0) return;
  round_to_f16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(out, in, n);
  MT_CUDA_LAUNCH_CHECK();
}

// out[0..n) = in[0..n); the same-storage cases copy (cudaMemcpyDefault: in
// may also be host memory there).
void convert(WriteView out, ReadView in, int64_t n) {
  if (n <= 0) return;
  if (out.f32 && in.f32)
    MT_CUDA_CHECK(
        cudaMemcpyAsync(out.f32, in.f32, size_t(n) * sizeof(float), cudaMemcpyDefault, stream()));
  else if (out.f32)
    cuda::bf16_to_f32(out.f32, in.bf16, n);
  else if (in.f32)
    cuda::f32_to_bf16(out.bf16, in.f32, n);
  else
    MT_CUDA_CHECK(cudaMemcpyAsync(out.bf16, in.bf16, size_t(n) * sizeof(uint16_t),
                                  cudaMemcpyDefault, stream()));
}

}  // namespace mt::cuda
