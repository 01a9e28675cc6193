// CUDA twin of kernels/cross_entropy.h (same signatures; GPU pointers; the
// targets on the GPU, or on the host: then copied to the GPU).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt::cuda {

// row_max (n) =
void cross_entropy_shard_max(float* row_max, const float* logits, int64_t n, int64_t v_local);
// sum_exp (n) =, target_logit (n) =; logits = exp(logits - row_max) with keep_exp
void cross_entropy_shard_sums(double* sum_exp, double* target_logit, float* logits,
                              const float* row_max, const int32_t* targets, int64_t n,
                              int64_t v_local, int64_t v_start, bool keep_exp);
// losses (n) =; grad (n, v_local) = when grad_scale != 0
void cross_entropy_shard_finish(float* losses, WriteView grad, const float* logits,
                                const double* sum_exp, const double* target_logit,
                                const int32_t* targets, int64_t n, int64_t v_local,
                                int64_t v_start, float grad_scale);
// losses (n) =; logits (n, v) = exponentials and grad (n, v) = when grad_scale != 0
void cross_entropy_rows(float* losses, float* logits, WriteView grad, const int32_t* targets,
                        int64_t n, int64_t v, float grad_scale);
// Every target in [0, v), else the CPU's error for the first bad row.
void check_targets(const int32_t* targets, int64_t n, int64_t v);
// losses (n) =; logits (n, v) = gradient in place when grad_scale != 0
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale);

}  // namespace mt::cuda
