// GELU (tanh approximation) on the GPU: gelu.cc's sigmoid form,
//   gelu(x) = x s,  gelu'(x) = s + 2 x s (1 - s) k (1 + 3 * 0.044715 x^2),
//   s = sigmoid(2 k (x + 0.044715 x^3)),
// with CUDA's expf (within 2 ulp) where the CPU has vec_math.h's exp_f32, so
// results agree to a few ulp. One thread per element.
#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gelu.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kKappa = 0.044715f;

__device__ __forceinline__ float gelu_sigmoid(float x) {
  const float x_cube = x * x * x;
  const float inner = kBeta * (x + kKappa * x_cube);
  return 1.f / (1.f + expf(-2.f * inner));
}

template <class To, class Ti>
__global__ void gelu_forward_kernel(To* out, const Ti* inp, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = ld_f32(inp, i);
  st_f32(out, i, x * gelu_sigmoid(x));
}

// dinp may alias dout: each thread reads its dout before writing its dinp.
template <class Ti>
__global__ void gelu_backward_kernel(float* dinp, const Ti* inp, const float* dout, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = ld_f32(inp, i);
  const float s = gelu_sigmoid(x);
  const float slope = kBeta * (1.f + 3.f * kKappa * (x * x));
  dinp[i] = dout[i] * (s + 2.f * x * s * (1.f - s) * slope);
}

}  // namespace

// out (n) =
void gelu_forward(WriteView out, ReadView inp, int64_t n) {
  if (n <= 0) return;
  visit(out, [&](auto* y) {
    visit(inp, [&](const auto* x) {
      gelu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(y, x, n);
    });
  });
  MT_CUDA_LAUNCH_CHECK();
}

// dinp (n) = dout * gelu'(inp)   (may alias dout)
void gelu_backward(float* dinp, ReadView inp, const float* dout, int64_t n) {
  if (n <= 0) return;
  visit(inp, [&](const auto* x) {
    gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(dinp, x, dout, n);
  });
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
