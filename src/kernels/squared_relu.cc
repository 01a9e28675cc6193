// Squared ReLU forward/backward (OpenMP simd; see squared_relu.h).
#include "kernels/squared_relu.h"

#include "backend/device.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/squared_relu.h"

namespace mt {

namespace {

template <class To, class Ti>
void forward_impl(To* out, const Ti* inp, int64_t n) {
  for_slices_on_isa(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float r = load_f32(inp, i) > 0.f ? load_f32(inp, i) : 0.f;
      store_f32(out, i, r * r);
    }
  });
}

template <class Ti>
void backward_impl(float* dinp, const Ti* inp, const float* dout, int64_t n) {
  for_slices_on_isa(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float r = load_f32(inp, i) > 0.f ? load_f32(inp, i) : 0.f;
      dinp[i] = dout[i] * (2.f * r);
    }
  });
}

}  // namespace

void squared_relu_forward(WriteView out, ReadView inp, int64_t n) {
  if (MT_ON_DEVICE(out.raw())) return cuda::squared_relu_forward(out, inp, n);
  visit(out, [&](auto* y) { visit(inp, [&](const auto* x) { forward_impl(y, x, n); }); });
}

void squared_relu_backward(float* dinp, ReadView inp, const float* dout, int64_t n) {
  if (MT_ON_DEVICE(dinp)) return cuda::squared_relu_backward(dinp, inp, dout, n);
  visit(inp, [&](const auto* x) { backward_impl(dinp, x, dout, n); });
}

}  // namespace mt
