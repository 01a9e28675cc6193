// CUDA twins of kernels/precision.h's array conversions (same signatures; GPU
// pointers). cpu_has_native_bf16 stays host-only.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// out[i] = bf16 of in[i] (bf16_from_f32's rounding, bit for bit)
void f32_to_bf16(uint16_t* out, const float* in, int64_t n);
// out[i] = in[i] widened to fp32 (exact)
void bf16_to_f32(float* out, const uint16_t* in, int64_t n);
// out[i] = f16_round(in[i]); out may equal in
void round_to_f16(float* out, const float* in, int64_t n);
// out[0..n) = in[0..n), widened or rounded as the views are stored
void convert(WriteView out, ReadView in, int64_t n);

}  // namespace mt::cuda
