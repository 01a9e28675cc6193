// CUDA twin of kernels/rope.h's rotations (same signatures; x on the GPU, the
// RopeTable on the host as make_rope_table builds it: rope.cu keeps a device
// copy of its cos/sin, uploaded on first use).
#pragma once
#include <cstdint>

#include "kernels/rope.h"

namespace mt::cuda {

// x (b, a, s, d) =, in place; sequence index t is at position pos0 + t
void rope_forward(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                  int64_t pos0);
// dx (b, a, s, d) =, in place: the inverse rotation
void rope_backward(float* dx, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                   int64_t pos0);

}  // namespace mt::cuda
