// RMSNorm forward/backward (fp32, OpenMP), with the precision choices of
// layernorm.cc: per-row statistics summed in float (simd reduction),
// parameter gradients summed over rows in double.
//
// Backward is deterministic for any thread count, as layernorm_backward: dinp
// row by row (rows are independent), then dweight by a second pass parallel
// over blocks of columns in which each thread sums all rows of its columns in
// row order, so no atomics and no thread-count-dependent reduction trees.
#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/rmsnorm.h"

namespace mt {

namespace {

// Columns per block of the parameter-gradient pass (as layernorm.cc).
constexpr int64_t kColBlock = 64;

}  // namespace

namespace {

template <class To, class Ti, class W>
void forward_impl(To* out, float* rstd, const Ti* inp, const W* weight, int64_t n,
                  int64_t c, float eps, float w1) {
  MT_CHECK(n >= 0 && c > 0, "rmsnorm_forward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  MT_CHECK(eps > 0.f, "rmsnorm_forward: eps=", eps, " must be > 0; fix: use e.g. 1e-5");
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    const auto* x = inp + i * c;
    auto* y = out + i * c;
    float sq = 0.f;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < c; ++j) sq += load_f32(x, j) * load_f32(x, j);
    const float r = 1.f / std::sqrt(sq / float(c) + eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j)
      store_f32(y, j, load_f32(x, j) * r * (load_f32(weight, j) + w1));
    rstd[i] = r;
  });
}

template <class Ti, class W>
void backward_impl(float* dinp, float* dweight, const float* dout, const Ti* inp,
                   const W* weight, const float* rstd, int64_t n, int64_t c, float w1) {
  MT_CHECK(n >= 0 && c > 0, "rmsnorm_backward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  const int64_t nblocks = (c + kColBlock - 1) / kColBlock;
  const Isa isa = active_isa();
#pragma omp parallel
  {
    // dinp: with xhat = x * rstd and g = dout * weight (d rstd / dx = -rstd^3 x / c),
    // dx = rstd * (g - xhat * mean(g * xhat)).
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
      const auto* x = inp + i * c;
      const float* dy = dout + i * c;
      float* dx = dinp + i * c;
      const float r = rstd[i];
      float sum_gx = 0.f;
#pragma omp simd reduction(+ : sum_gx)
      for (int64_t j = 0; j < c; ++j)
        sum_gx += dy[j] * (load_f32(weight, j) + w1) * (load_f32(x, j) * r);
      const float mean_gx = sum_gx / float(c);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j)
        dx[j] += r * (dy[j] * (load_f32(weight, j) + w1) - (load_f32(x, j) * r) * mean_gx);
    });
    // dweight = sum_i dout * xhat, over rows in order.
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < nblocks; ++blk) on_isa(isa, [=] {
      const int64_t c0 = blk * kColBlock, w = std::min(kColBlock, c - c0);
      double acc[kColBlock] = {};
      for (int64_t i = 0; i < n; ++i) {
        const auto* x = inp + i * c + c0;
        const float* dy = dout + i * c + c0;
        const float r = rstd[i];
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) acc[j] += double(dy[j] * (load_f32(x, j) * r));
      }
      for (int64_t j = 0; j < w; ++j) dweight[c0 + j] += float(acc[j]);
    });
  }
}

}  // namespace

void rmsnorm_forward(WriteView out, float* rstd, ReadView inp, ReadView weight, int64_t n,
                     int64_t c, float eps, bool zero_centered_gamma) {
  if (MT_ON_DEVICE(out.raw()))
    return cuda::rmsnorm_forward(out, rstd, inp, weight, n, c, eps, zero_centered_gamma);
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(out && inp && weight, "rmsnorm_forward: null output, input or weight");
  visit(out, [&](auto* y) {
    visit(inp, [&](const auto* x) {
      visit(weight, [&](const auto* w) { forward_impl(y, rstd, x, w, n, c, eps, w1); });
    });
  });
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, ReadView inp,
                      ReadView weight, const float* rstd, int64_t n, int64_t c,
                      bool zero_centered_gamma) {
  if (MT_ON_DEVICE(dinp))
    return cuda::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, n, c,
                                  zero_centered_gamma);
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(inp && weight, "rmsnorm_backward: null input or weight");
  visit(inp, [&](const auto* x) {
    visit(weight, [&](const auto* w) { backward_impl(dinp, dweight, dout, x, w, rstd, n, c, w1); });
  });
}

}  // namespace mt
