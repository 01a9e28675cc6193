// CUDA twin of kernels/adamw.h (same signature; param, grad, m, v and
// param_bf16 on the GPU).
#pragma once
#include <cstdint>

#include "kernels/adamw.h"

namespace mt::cuda {

// param, m, v (n) updated in place (=); param_bf16 (n), if non-null: = bf16 of
// the new param. step is 1-based.
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWHyper& h,
                int64_t step, uint16_t* param_bf16 = nullptr);

}  // namespace mt::cuda
