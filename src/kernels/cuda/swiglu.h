// CUDA twin of kernels/swiglu.h (same signatures; GPU pointers).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// in (n, 2f): rows [gate (f) | up (f)];  out (n, f) = silu(gate) * up        [=]
void swiglu_forward(WriteView out, ReadView in, int64_t n, int64_t f);
// din (n, 2f) = [dout * up * silu'(gate) | dout * silu(gate)]                [=]
void swiglu_backward(float* din, ReadView in, const float* dout, int64_t n, int64_t f);

}  // namespace mt::cuda
