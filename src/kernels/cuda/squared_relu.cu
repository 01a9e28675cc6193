// Squared ReLU on the GPU: y = relu(x)^2, dx = dy * 2 relu(x), element by
// element over a grid-stride loop (the same arithmetic as squared_relu.cc,
// so results agree exactly).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/squared_relu.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

template <class To, class Ti>
__global__ void forward_kernel(To* out, const Ti* inp, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float r = fmaxf(ld_f32(inp, i), 0.f);
    st_f32(out, i, r * r);
  }
}

// dinp may alias dout: each thread reads dout[i] before writing dinp[i].
template <class Ti>
__global__ void backward_kernel(float* dinp, const Ti* inp, const float* dout, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dinp[i] = dout[i] * (2.f * fmaxf(ld_f32(inp, i), 0.f));
}

unsigned grid_for(int64_t n) {
  return unsigned(blocks_for(n < int64_t(kThreads) * 65535 ? n : int64_t(kThreads) * 65535,
                             kThreads));
}

}  // namespace

// out (n) =
void squared_relu_forward(WriteView out, ReadView inp, int64_t n) {
  if (n <= 0) return;
  visit(out, [&](auto* y) {
    visit(inp, [&](const auto* x) {
      forward_kernel<<<grid_for(n), kThreads, 0, stream()>>>(y, x, n);
    });
  });
  MT_CUDA_LAUNCH_CHECK();
}

// dinp (n) = dout * 2 relu(inp)   (may alias dout)
void squared_relu_backward(float* dinp, ReadView inp, const float* dout, int64_t n) {
  if (n <= 0) return;
  visit(inp, [&](const auto* x) {
    backward_kernel<<<grid_for(n), kThreads, 0, stream()>>>(dinp, x, dout, n);
  });
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
