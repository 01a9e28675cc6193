// SwiGLU on the GPU, swiglu.cc's formulas:
//   out = g s u,  dg = dout u s (1 + g (1 - s)),  du = dout g s,  s = sigmoid(g),
// sigmoid from e = exp(-|g|) (no overflow, small sigmoids keep their relative
// accuracy), with CUDA's expf where the CPU has exp_f32 (a few ulp apart).
// One block per row, its threads striding over the row's f columns.
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/swiglu.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float r = 1.f / (1.f + e);
  return x >= 0.f ? r : e * r;
}

// One row i per block.
template <class To, class Ti>
__global__ void swiglu_forward_kernel(To* out, const Ti* in, int64_t f) {
  const int64_t i = blockIdx.x;
  const Ti* g = in + i * 2 * f;
  const Ti* u = g + f;
  To* y = out + i * f;
  for (int64_t j = threadIdx.x; j < f; j += blockDim.x) {
    const float x = ld_f32(g, j);
    st_f32(y, j, x * sigmoid(x) * ld_f32(u, j));
  }
}

template <class Ti>
__global__ void swiglu_backward_kernel(float* din, const Ti* in, const float* dout, int64_t f) {
  const int64_t i = blockIdx.x;
  const Ti* g = in + i * 2 * f;
  const Ti* u = g + f;
  const float* dy = dout + i * f;
  float* dg = din + i * 2 * f;
  float* du = dg + f;
  for (int64_t j = threadIdx.x; j < f; j += blockDim.x) {
    const float x = ld_f32(g, j), s = sigmoid(x);
    dg[j] = dy[j] * ld_f32(u, j) * (s * (1.f + x * (1.f - s)));
    du[j] = dy[j] * (x * s);
  }
}

// Rows are blocks (grid.x <= 2^31 - 1).
void check_rows(const char* who, int64_t n) {
  MT_CHECK(n <= int64_t(INT32_MAX), who, ": n=", n,
           " rows exceed the CUDA grid (2^31 - 1); fix: split the call into fewer rows");
}

}  // namespace

// out (n, f) =   (shapes checked by the entry point, swiglu.cc)
void swiglu_forward(WriteView out, ReadView in, int64_t n, int64_t f) {
  if (n <= 0 || f <= 0) return;
  check_rows("swiglu_forward", n);
  visit(out, [&](auto* y) {
    visit(in, [&](const auto* x) {
      swiglu_forward_kernel<<<unsigned(n), kThreads, 0, stream()>>>(y, x, f);
    });
  });
  MT_CUDA_LAUNCH_CHECK();
}

// din (n, 2f) =   (din not aliasing dout: checked by the entry point)
void swiglu_backward(float* din, ReadView in, const float* dout, int64_t n, int64_t f) {
  if (n <= 0 || f <= 0) return;
  check_rows("swiglu_backward", n);
  visit(in, [&](const auto* x) {
    swiglu_backward_kernel<<<unsigned(n), kThreads, 0, stream()>>>(din, x, dout, f);
  });
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
