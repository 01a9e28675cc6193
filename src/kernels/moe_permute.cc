#include "kernels/moe_permute.h"

#include <omp.h>

namespace mt {

void gather_rows(WriteView dst, ReadView src, const int64_t* rows, int64_t n, int64_t h) {
  visit(dst, [&](auto* d) {
    visit(src, [&](const auto* s) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = rows[i];
        for (int64_t c = 0; c < h; ++c)
          store_f32(d, i * h + c, r < 0 ? 0.f : load_f32(s, r * h + c));
      }
    });
  });
}

void scatter_add_rows(float* dst, ReadView src, const int64_t* rows, const float* weight, int64_t n,
                      int64_t h) {
  visit(src, [&](const auto* s) {
  // Columns split over threads: each destination element is summed in row order.
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t c0 = h * t / threads, c1 = h * (t + 1) / threads;
      for (int64_t i = 0; i < n; ++i) {
        if (rows[i] < 0) continue;
        const float w = weight ? weight[i] : 1.f;
        float* d = dst + rows[i] * h;
        for (int64_t c = c0; c < c1; ++c) d[c] += w * load_f32(s, i * h + c);
      }
    }
  });
}

// kLanes running sums, lane j over the columns c = j mod kLanes, then added
// in lane order: vectorised (one sum's chain of dependent adds took ~1% of a
// DeepSeek-shaped step), and the same numbers on every instruction set.
void row_dots(float* out, ReadView a, ReadView b, int64_t n, int64_t h) {
  constexpr int64_t kLanes = 8;
  visit(a, [&](const auto* x) {
    visit(b, [&](const auto* y) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const auto* xr = x + i * h;
        const auto* yr = y + i * h;
        double lane[kLanes] = {};
        const int64_t full = h / kLanes * kLanes;
        for (int64_t c = 0; c < full; c += kLanes) {
#pragma omp simd
          for (int64_t j = 0; j < kLanes; ++j)
            lane[j] += double(load_f32(xr, c + j)) * double(load_f32(yr, c + j));
        }
        for (int64_t c = full; c < h; ++c)
          lane[c - full] += double(load_f32(xr, c)) * double(load_f32(yr, c));
        double sum = 0;
        for (int64_t j = 0; j < kLanes; ++j) sum += lane[j];
        out[i] = float(sum);
      }
    });
  });
}

void scale_rows(WriteView out, ReadView in, const float* w, int64_t n, int64_t h) {
  visit(out, [&](auto* o) {
    visit(in, [&](const auto* x) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < h; ++c) store_f32(o, i * h + c, w[i] * load_f32(x, i * h + c));
    });
  });
}

}  // namespace mt
