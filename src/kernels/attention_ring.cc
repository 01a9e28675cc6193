#include "kernels/attention_ring.h"

#include <algorithm>

namespace mt {

template <class T>
void pack_head_groups(T* packed, const T* heads, int64_t batches, int64_t a, int64_t g,
                      int64_t cd) {
  const int64_t r = a / g;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t gi = 0; gi < g; ++gi)
      std::copy_n(heads + (bi * a + gi * r) * cd, cd, packed + (bi * g + gi) * cd);
}

template <class T>
void unpack_head_groups(T* heads, const T* packed, int64_t batches, int64_t a, int64_t g,
                        int64_t cd) {
  const int64_t r = a / g;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t hi = 0; hi < a; ++hi)
      std::copy_n(packed + (bi * g + hi / r) * cd, cd, heads + (bi * a + hi) * cd);
}

void add_head_group_sums(float* packed, const float* heads, int64_t batches, int64_t a, int64_t g,
                         int64_t cd) {
  const int64_t r = a / g;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t gi = 0; gi < g; ++gi) {
      float* dst = packed + (bi * g + gi) * cd;
      for (int64_t j = 0; j < r; ++j) {
        const float* src = heads + (bi * a + gi * r + j) * cd;
        for (int64_t i = 0; i < cd; ++i) dst[i] += src[i];
      }
    }
}

void head_groups_to_first_heads(float* heads, const float* packed, int64_t batches, int64_t a,
                                int64_t g, int64_t cd) {
  const int64_t r = a / g;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t hi = 0; hi < a; ++hi) {
      float* dst = heads + (bi * a + hi) * cd;
      if (hi % r == 0)
        std::copy_n(packed + (bi * g + hi / r) * cd, cd, dst);
      else
        std::fill(dst, dst + cd, 0.f);
    }
}

template void pack_head_groups<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void pack_head_groups<uint16_t>(uint16_t*, const uint16_t*, int64_t, int64_t, int64_t,
                                         int64_t);
template void unpack_head_groups<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void unpack_head_groups<uint16_t>(uint16_t*, const uint16_t*, int64_t, int64_t, int64_t,
                                           int64_t);

void add_inplace(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void ring_row_dsum(float* dsum, const float* dctx, ReadView ctx_sbh, const AttentionDims& dims) {
  const int64_t b = dims.b, a = dims.a, d = attention_dv(dims), c = dims.s / 2;
  visit(ctx_sbh, [&](auto* ctx) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t jb = 0; jb < 2 * b; ++jb)  // (chunk, sample)
      for (int64_t hi = 0; hi < a; ++hi)
        for (int64_t p = 0; p < c; ++p) {
          const int64_t j = jb / b, bi = jb % b;
          const float* dc = dctx + ((jb * a + hi) * c + p) * d;
          const int64_t o = ((j * c + p) * b + bi) * a * d + hi * d;  // row (j·c + p, bi), head hi
          float acc = 0.f;
#pragma omp simd reduction(+ : acc)
          for (int64_t t = 0; t < d; ++t) acc += dc[t] * load_f32(ctx, o + t);
          dsum[(jb * a + hi) * c + p] = acc;
        }
  });
}

}  // namespace mt
