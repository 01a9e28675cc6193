// Row moves of a mixture-of-experts layer: tokens gathered into the experts'
// input order, expert outputs scattered back and weighted by their gates.
// Rows are h wide; activations are fp32 or bf16 storage, arithmetic fp32.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// dst row i = src row rows[i], or zeros where rows[i] < 0 (padding).   [=]
void gather_rows(WriteView dst, ReadView src, const int64_t* rows, int64_t n, int64_t h);
// dst row rows[i] += weight[i] · src row i (weight null: 1), for i in order
// (a destination row named twice sums in that order); rows[i] < 0 is skipped.
void scatter_add_rows(float* dst, ReadView src, const int64_t* rows, const float* weight,
                      int64_t n, int64_t h);
// out[i] = <a row i, b row i>, summed in double (8 interleaved partial sums,
// added in order: the same on every CPU).                                [=]
void row_dots(float* out, ReadView a, ReadView b, int64_t n, int64_t h);
// out row i = w[i] · in row i.                                          [=]
void scale_rows(WriteView out, ReadView in, const float* w, int64_t n, int64_t h);

}  // namespace mt
