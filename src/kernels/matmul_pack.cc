// Dense operand copies for the matmul kernel's low-precision paths (matmul_pack.h).
#include "kernels/matmul_pack.h"

#include "kernels/precision.h"

namespace mt {
namespace {

// dst (batch·rows, cols) dense = convert(src), src being `batch` matrices of
// `rows` rows of `cols` values, row stride ld, batch stride bs. OpenMP over rows
// (or over elements when src is dense too).
template <typename T, typename Src, typename Convert>
void pack_dense(T* dst, const Src* src, int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                int64_t bs, Convert convert) {
  constexpr int64_t kParallelMin = 1 << 15;  // elements; below, the fork costs more
  const int64_t total_rows = batch * rows, n = total_rows * cols;
  if (ld == cols && (batch == 1 || bs == rows * cols)) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) dst[i] = convert(src[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t r = 0; r < total_rows; ++r) {
    const Src* in = src + (r / rows) * bs + (r % rows) * ld;
    T* out = dst + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) out[j] = convert(in[j]);
  }
}

}  // namespace

// Packs operand x (stored `rows` × `cols`, strides *ld / *bs) into dense
// scratch in the representation `math` needs, and rewrites *ld / *bs to dense.
const void* pack_operand(HostBuffer& buf, const float* x, MathMode math, int64_t batch,
                         int64_t rows, int64_t cols, int64_t* ld, int64_t* bs) {
  const int64_t n = batch * rows * cols;
  const void* out;
  if (math == MathMode::kBF16) {
    auto* dst = static_cast<uint16_t*>(grown(buf, size_t(n) * sizeof(uint16_t)));
    pack_dense(dst, x, batch, rows, cols, *ld, *bs, [](float v) { return bf16_from_f32(v); });
    out = dst;
  } else {
    auto* dst = static_cast<float*>(grown(buf, size_t(n) * sizeof(float)));
    pack_dense(dst, x, batch, rows, cols, *ld, *bs, [](float v) { return f16_round(v); });
    out = dst;
  }
  *ld = cols;
  *bs = rows * cols;
  return out;
}

// bf16 without oneDNN's bf16 matmul: operand x (or its bf16 twin x16, in
// x's layout) as fp32 values rounded to bf16, packed dense into scratch.
const float* pack_bf16_as_f32(HostBuffer& buf, const float* x, const uint16_t* x16, int64_t batch,
                              int64_t rows, int64_t cols, int64_t* ld, int64_t* bs) {
  auto* dst = static_cast<float*>(grown(buf, size_t(batch * rows * cols) * sizeof(float)));
  if (x16 != nullptr)
    pack_dense(dst, x16, batch, rows, cols, *ld, *bs, [](uint16_t v) { return f32_from_bf16(v); });
  else
    pack_dense(dst, x, batch, rows, cols, *ld, *bs,
               [](float v) { return f32_from_bf16(bf16_from_f32(v)); });
  *ld = cols;
  *bs = rows * cols;
  return dst;
}

}  // namespace mt
