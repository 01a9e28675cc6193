// LayerNorm forward/backward (fp32, OpenMP). Statistics as torch.nn.LayerNorm:
// biased variance over the last dimension, rstd = 1 / sqrt(var + eps).
//
// Backward is deterministic for any thread count: dinp is computed row by
// row (rows are independent), and dweight/dbias by a second pass parallel over
// blocks of columns in which each thread sums all rows of its columns in row
// order, so no atomics and no thread-count-dependent reduction trees.
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/layernorm.h"

namespace mt {

namespace {

// Columns per block of the parameter-gradient pass: 64 floats = 4 cache lines,
// enough for simd and few enough that hidden sizes >= 128 give every core work.
constexpr int64_t kColBlock = 64;

}  // namespace

namespace {

template <class To, class Ti, class W, class B>
void forward_impl(To* out, float* mean, float* rstd, const Ti* inp, const W* weight,
                  const B* bias, int64_t n, int64_t c, float eps, float w1) {
  MT_CHECK(n >= 0 && c > 0, "layernorm_forward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  MT_CHECK(eps > 0.f, "layernorm_forward: eps=", eps, " must be > 0; fix: use e.g. 1e-5");
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    const auto* x = inp + i * c;
    auto* y = out + i * c;
    // Two passes (mean, then centred squares) are stable for any offset.
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j) sum += load_f32(x, j);
    const float m = sum / float(c);
    float sq = 0.f;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < c; ++j) {
      const float d = load_f32(x, j) - m;
      sq += d * d;
    }
    const float var = sq / float(c);
    const float r = 1.f / std::sqrt(var + eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j)
      store_f32(y, j, (load_f32(x, j) - m) * r * (load_f32(weight, j) + w1) + load_f32(bias, j));
    mean[i] = m;
    rstd[i] = r;
  });
}

template <class Ti, class W>
void backward_impl(float* dinp, float* dweight, float* dbias, const float* dout,
                   const Ti* inp, const W* weight, const float* mean, const float* rstd,
                   int64_t n, int64_t c, float w1) {
  MT_CHECK(n >= 0 && c > 0, "layernorm_backward: bad shape n=", n, " c=", c,
           "; fix: pass the row count and a positive hidden size");
  const int64_t nblocks = (c + kColBlock - 1) / kColBlock;
  const Isa isa = active_isa();
#pragma omp parallel
  {
    // dinp: with xhat = (x - mean) * rstd and g = dout * weight,
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
      const auto* x = inp + i * c;
      const float* dy = dout + i * c;
      float* dx = dinp + i * c;
      const float m = mean[i], r = rstd[i];
      float sum_g = 0.f, sum_gx = 0.f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t j = 0; j < c; ++j) {
        const float g = dy[j] * (load_f32(weight, j) + w1);
        sum_g += g;
        sum_gx += g * ((load_f32(x, j) - m) * r);
      }
      const float mean_g = sum_g / float(c), mean_gx = sum_gx / float(c);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const float xhat = (load_f32(x, j) - m) * r;
        dx[j] += r * (dy[j] * (load_f32(weight, j) + w1) - mean_g - xhat * mean_gx);
      }
    });
    // dweight = sum_i dout * xhat, dbias = sum_i dout, over rows in order.
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < nblocks; ++blk) on_isa(isa, [=] {
      const int64_t c0 = blk * kColBlock, w = std::min(kColBlock, c - c0);
      double acc_w[kColBlock] = {}, acc_b[kColBlock] = {};
      for (int64_t i = 0; i < n; ++i) {
        const auto* x = inp + i * c + c0;
        const float* dy = dout + i * c + c0;
        const float m = mean[i], r = rstd[i];
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          acc_w[j] += double(dy[j] * ((load_f32(x, j) - m) * r));
          acc_b[j] += double(dy[j]);
        }
      }
      for (int64_t j = 0; j < w; ++j) {
        dweight[c0 + j] += float(acc_w[j]);
        dbias[c0 + j] += float(acc_b[j]);
      }
    });
  }
}

}  // namespace

void layernorm_forward(WriteView out, float* mean, float* rstd, ReadView inp, ReadView weight,
                       ReadView bias, int64_t n, int64_t c, float eps,
                       bool zero_centered_gamma) {
  if (MT_ON_DEVICE(out.raw()))
    return cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, n, c, eps,
                                   zero_centered_gamma);
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(out && inp && weight && bias, "layernorm_forward: null output, input, weight or bias");
  visit(out, [&](auto* y) {
    visit(inp, [&](const auto* x) {
      visit(weight, [&](const auto* w) {
        visit(bias, [&](const auto* b) { forward_impl(y, mean, rstd, x, w, b, n, c, eps, w1); });
      });
    });
  });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        ReadView inp, ReadView weight, const float* mean,
                        const float* rstd, int64_t n, int64_t c, bool zero_centered_gamma) {
  if (MT_ON_DEVICE(dinp))
    return cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c,
                                    zero_centered_gamma);
  const float w1 = zero_centered_gamma ? 1.f : 0.f;
  MT_CHECK(inp && weight, "layernorm_backward: null input or weight");
  visit(inp, [&](const auto* x) {
    visit(weight, [&](const auto* w) {
      backward_impl(dinp, dweight, dbias, dout, x, w, mean, rstd, n, c, w1);
    });
  });
}

}  // namespace mt
