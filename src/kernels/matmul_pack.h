// Dense operand copies for matmul (kernels/matmul.cc) in the representation
// its math mode multiplies: the operand, stored `rows` × `cols` in `batch`
// matrices with row stride *ld and batch stride *bs, is packed densely into
// `buf` (grown to fit, then reused), and *ld / *bs are rewritten to the dense
// strides. OpenMP over rows, or over elements when the operand is dense too.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "kernels/precision.h"

namespace mt {

// bf16 math: bf16 values (uint16_t); fp16 (emulated): fp32 values rounded to fp16.
const void* pack_operand(HostBuffer& buf, const float* x, MathMode math, int64_t batch,
                         int64_t rows, int64_t cols, int64_t* ld, int64_t* bs);

// bf16 math without oneDNN's bf16 matmul: x (or its bf16 twin x16, in x's
// layout) as fp32 values rounded to bf16.
const float* pack_bf16_as_f32(HostBuffer& buf, const float* x, const uint16_t* x16, int64_t batch,
                              int64_t rows, int64_t cols, int64_t* ld, int64_t* bs);

}  // namespace mt
