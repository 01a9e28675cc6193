#include "kernels/layout.h"

#include <cstring>

namespace mt {

void qkv_to_heads(float* q, float* k, float* v, const float* qkv, int64_t s, int64_t b,
                  int64_t a, int64_t d) {
  const size_t row = size_t(d) * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t t = 0; t < s; ++t) {
        const float* src = qkv + ((t * b + bi) * a + j) * 3 * d;
        const int64_t dst = ((bi * a + j) * s + t) * d;
        std::memcpy(q + dst, src, row);
        std::memcpy(k + dst, src + d, row);
        std::memcpy(v + dst, src + 2 * d, row);
      }
}

void heads_to_qkv(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t s,
                  int64_t b, int64_t a, int64_t d) {
  const size_t row = size_t(d) * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t t = 0; t < s; ++t)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t j = 0; j < a; ++j) {
        float* dst = dqkv + ((t * b + bi) * a + j) * 3 * d;
        const int64_t src = ((bi * a + j) * s + t) * d;
        std::memcpy(dst, dq + src, row);
        std::memcpy(dst + d, dk + src, row);
        std::memcpy(dst + 2 * d, dv + src, row);
      }
}

void heads_to_sbh(float* out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d) {
  const size_t row = size_t(d) * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t t = 0; t < s; ++t)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t j = 0; j < a; ++j)
        std::memcpy(out + ((t * b + bi) * a + j) * d, x + ((bi * a + j) * s + t) * d, row);
}

void sbh_to_heads(float* out, const float* x, int64_t s, int64_t b, int64_t a, int64_t d) {
  const size_t row = size_t(d) * sizeof(float);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t t = 0; t < s; ++t)
        std::memcpy(out + ((bi * a + j) * s + t) * d, x + ((t * b + bi) * a + j) * d, row);
}

}  // namespace mt
