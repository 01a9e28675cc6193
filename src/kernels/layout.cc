#include "kernels/layout.h"

#include <cstring>

#include "backend/device.h"
#include "kernels/cuda/layout.h"

namespace mt {

void qkv_to_heads(float* q, float* k, float* v, const float* qkv, int64_t s, int64_t b,
                  int64_t a, int64_t g, int64_t d) {
  if (MT_ON_DEVICE(q)) return cuda::qkv_to_heads(q, k, v, qkv, s, b, a, g, d);
  const size_t row = size_t(d) * sizeof(float);
  const int64_t hpg = a / g, width = (hpg + 2) * d;  // heads per group, floats per group
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t t = 0; t < s; ++t) {
        const float* grp = qkv + ((t * b + bi) * g + j / hpg) * width;
        const int64_t dst = ((bi * a + j) * s + t) * d;
        std::memcpy(q + dst, grp + (j % hpg) * d, row);
        std::memcpy(k + dst, grp + hpg * d, row);
        std::memcpy(v + dst, grp + (hpg + 1) * d, row);
      }
}

void heads_to_qkv(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t s,
                  int64_t b, int64_t a, int64_t g, int64_t d) {
  if (MT_ON_DEVICE(dqkv)) return cuda::heads_to_qkv(dqkv, dq, dk, dv, s, b, a, g, d);
  const size_t row = size_t(d) * sizeof(float);
  const int64_t hpg = a / g, width = (hpg + 2) * d;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t t = 0; t < s; ++t)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t gi = 0; gi < g; ++gi) {
        float* dst = dqkv + ((t * b + bi) * g + gi) * width;
        float* dkg = dst + hpg * d;
        float* dvg = dkg + d;
        for (int64_t i = 0; i < hpg; ++i) {  // a group's heads in order: deterministic sums
          const int64_t src = ((bi * a + gi * hpg + i) * s + t) * d;
          std::memcpy(dst + i * d, dq + src, row);
          if (i == 0) {
            std::memcpy(dkg, dk + src, row);
            std::memcpy(dvg, dv + src, row);
          } else {
            for (int64_t e = 0; e < d; ++e) {
              dkg[e] += dk[src + e];
              dvg[e] += dv[src + e];
            }
          }
        }
      }
}

void heads_to_sbh(WriteView out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d) {
  if (MT_ON_DEVICE(out.raw())) return cuda::heads_to_sbh(out, x, s, b, a, d);
  visit(out, [&](auto* y) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < s; ++t)
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t j = 0; j < a; ++j) {
          auto* dst = y + ((t * b + bi) * a + j) * d;
          const float* src = x + ((bi * a + j) * s + t) * d;
#pragma omp simd
          for (int64_t e = 0; e < d; ++e) store_f32(dst, e, src[e]);
        }
  });
}

void sbh_to_heads(float* out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d) {
  if (MT_ON_DEVICE(out)) return cuda::sbh_to_heads(out, x, s, b, a, d);
  const size_t row = size_t(d) * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t t = 0; t < s; ++t)
        std::memcpy(out + ((bi * a + j) * s + t) * d, x + ((t * b + bi) * a + j) * d, row);
}

}  // namespace mt
