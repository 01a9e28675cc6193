// Dropout on the GPU with dropout.cc's mask: element (t, bi, j) of a local
// (s_local, b, h_local) activation is kept iff the uniform of global index
//   g = ((sample0 + bi) * s_global + t0 + t) * h_global + h0 + j
// is >= p (RngStream::uniform, ported bit for bit in device_math.cuh); kept
// elements are scaled by 1 / (1 - p), the CPU's float. One block per row
// (t, bi); each thread draws one Philox block and serves the (up to) four
// elements of the row whose global indices fall in it.
//
// The masks and dropout_forward / dropout_backward (one product per element)
// equal the CPU's bit for bit; dropout_add_forward's r + x * mul may be one
// FMA on either device, so it agrees to round-off.
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/precision.h"

namespace mt::cuda {

namespace {

constexpr int kThreads = 256;

// What a row needs to find its elements' global indices and mask.
struct MaskArgs {
  PhiloxKey key;
  float p, scale;
  int64_t s_global, t0, h_global, h0, sample0;
  int64_t b, h_local;
};

MaskArgs mask_args(int64_t b, int64_t h_local, const DropoutSpec& d) {
  MaskArgs a;
  a.key = PhiloxKey{d.rng.k0, d.rng.k1, d.rng.step};
  a.p = d.p;
  a.scale = float(1.0 / (1.0 - double(d.p)));  // as dropout.cc
  a.s_global = d.s_global;
  a.t0 = d.t0;
  a.h_global = d.h_global;
  a.h0 = d.h0;
  a.sample0 = d.sample0;
  a.b = b;
  a.h_local = h_local;
  return a;
}

// Calls op(k, mul) for every element k of this block's row (row = blockIdx.x
// = t * b + bi), mul = scale (kept) or 0 (dropped). h_local > 0.
template <class Op>
__device__ __forceinline__ void for_each_masked_row(const MaskArgs& a, Op op) {
  const int64_t row = blockIdx.x;
  const int64_t t = row / a.b, bi = row % a.b;
  const int64_t k_row = row * a.h_local;
  const uint64_t base = uint64_t(((a.sample0 + bi) * a.s_global + a.t0 + t) * a.h_global + a.h0);
  const uint64_t blk0 = base >> 2;
  const int64_t off = int64_t(base & 3);  // position of j = 0 inside block blk0
  const int64_t nblk = (off + a.h_local + 3) >> 2;
  for (int64_t q = threadIdx.x; q < nblk; q += blockDim.x) {
    const uint4 r = philox_block(a.key, blk0 + uint64_t(q));
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int64_t j = 4 * q + w - off;  // global index 4 (blk0 + q) + w = base + j
      if (j < 0 || j >= a.h_local) continue;
      const float mul = uniform_of_word(philox_word(r, w)) >= a.p ? a.scale : 0.f;
      op(k_row + j, mul);
    }
  }
}

// out = residual + x * mul   (out may alias residual: each element is read,
// then written, by one thread)
template <class To, class Tr>
__global__ void dropout_add_kernel(To* out, const float* x, const Tr* residual, MaskArgs a) {
  for_each_masked_row(
      a, [=](int64_t k, float mul) { st_f32(out, k, ld_f32(residual, k) + x[k] * mul); });
}

template <class To>
__global__ void dropout_forward_kernel(To* out, const float* x, MaskArgs a) {
  for_each_masked_row(a, [=](int64_t k, float mul) { st_f32(out, k, x[k] * mul); });
}

__global__ void dropout_backward_kernel(float* dx, const float* dout, MaskArgs a) {
  for_each_masked_row(a, [=](int64_t k, float mul) { dx[k] = dout[k] * mul; });
}

// p = 0: out = residual + x, element-wise.
template <class To, class Tr>
__global__ void add_kernel(To* out, const float* x, const Tr* residual, int64_t n) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n) st_f32(out, k, ld_f32(residual, k) + x[k]);
}

// Rows are blocks (grid.x <= 2^31 - 1).
void check_rows(const char* who, int64_t rows) {
  MT_CHECK(rows <= int64_t(INT32_MAX), who, ": s_local * b = ", rows,
           " rows exceed the CUDA grid (2^31 - 1); fix: a smaller micro-batch or sequence");
}

}  // namespace

// out (s_local, b, h_local) = residual + dropout(x)   [=]  (spec checked by dropout.cc)
void dropout_add_forward(WriteView out, const float* x, ReadView residual, int64_t s_local,
                         int64_t b, int64_t h_local, const DropoutSpec& d) {
  const int64_t n = s_local * b * h_local;
  if (n <= 0) return;
  if (d.p == 0.f) {
    visit(out, [&](auto* y) {
      visit(residual, [&](const auto* r) {
        add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(y, x, r, n);
      });
    });
    MT_CUDA_LAUNCH_CHECK();
    return;
  }
  check_rows("dropout_add_forward", s_local * b);
  const MaskArgs a = mask_args(b, h_local, d);
  visit(out, [&](auto* y) {
    visit(residual, [&](const auto* r) {
      dropout_add_kernel<<<unsigned(s_local * b), kThreads, 0, stream()>>>(y, x, r, a);
    });
  });
  MT_CUDA_LAUNCH_CHECK();
}

// out = dropout(x)   [=]
void dropout_forward(WriteView out, const float* x, int64_t s_local, int64_t b, int64_t h_local,
                     const DropoutSpec& d) {
  const int64_t n = s_local * b * h_local;
  if (n <= 0) return;
  if (d.p == 0.f) {
    if (out.f32 != x) cuda::convert(out, x, n);
    return;
  }
  check_rows("dropout_forward", s_local * b);
  const MaskArgs a = mask_args(b, h_local, d);
  visit(out, [&](auto* y) {
    dropout_forward_kernel<<<unsigned(s_local * b), kThreads, 0, stream()>>>(y, x, a);
  });
  MT_CUDA_LAUNCH_CHECK();
}

// dx = mask * dout / (1 - p)   [=]
void dropout_backward(float* dx, const float* dout, int64_t s_local, int64_t b, int64_t h_local,
                      const DropoutSpec& d) {
  const int64_t n = s_local * b * h_local;
  if (n <= 0) return;
  if (d.p == 0.f) {
    if (dx != dout)
      MT_CUDA_CHECK(
          cudaMemcpyAsync(dx, dout, size_t(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  check_rows("dropout_backward", s_local * b);
  const MaskArgs a = mask_args(b, h_local, d);
  dropout_backward_kernel<<<unsigned(s_local * b), kThreads, 0, stream()>>>(dx, dout, a);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
