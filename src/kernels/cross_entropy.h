// Softmax cross-entropy fused with the output softmax, over a vocabulary that
// may be sharded (Megatron's vocab-parallel cross-entropy): a shard holds the
// logits of vocabulary columns [v_start, v_start + v_local). Three phases with
// an all-reduce between each (done by parallel/vocab_parallel_cross_entropy):
// row max → (max) → sum of exponentials and target logit → (sum) → loss and
// the logits' own gradient. Unsharded, cross_entropy_rows runs the same three
// steps row by row, while the row is in cache (one read of the logits from
// memory instead of three). Full logits are never gathered and no (n, v)
// probability tensor is kept. The gradient goes to the logits (fp32, in
// place) or to a bf16 array (a bf16 run's output layer reads it as it is).
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// row_max (n) = max over the shard's columns                          [=]
void cross_entropy_shard_max(float* row_max, const float* logits, int64_t n, int64_t v_local);

// sum_exp (n) = Σ_j exp(logits - row_max); target_logit (n) = logits[t - v_start] - row_max
// when the target t is in this shard, else 0                          [=, both]
// With keep_exp the logits are replaced by exp(logits - row_max) (for the gradient).
void cross_entropy_shard_sums(double* sum_exp, double* target_logit, float* logits,
                              const float* row_max, const int32_t* targets, int64_t n,
                              int64_t v_local, int64_t v_start, bool keep_exp);

// losses (n) = log(sum_exp) - target_logit                            [=]
// if grad_scale != 0 (logits hold exp from keep_exp):
//   grad (n, v_local) = grad_scale * (softmax - onehot(target))       [=]
// grad may be the logits themselves (fp32) or bf16 storage. row_scale (n, or
// null): row i's gradient is scaled by grad_scale * row_scale[i] instead (the
// loss mask and a micro-batch's own normalization; CPU only).
void cross_entropy_shard_finish(float* losses, WriteView grad, const float* logits,
                                const double* sum_exp, const double* target_logit,
                                const int32_t* targets, int64_t n, int64_t v_local,
                                int64_t v_start, float grad_scale,
                                const float* row_scale = nullptr);

// The three phases on an unsharded vocabulary (v columns), row by row: the
// same losses and gradient bits. logits are overwritten (with exponentials)
// when grad_scale != 0. Targets are not checked (check_targets).
void cross_entropy_rows(float* losses, float* logits, WriteView grad, const int32_t* targets,
                        int64_t n, int64_t v, float grad_scale, const float* row_scale = nullptr);

// Checks every target is in [0, v); the error names the id, row and v.
void check_targets(const int32_t* targets, int64_t n, int64_t v);

// The unsharded case in one call, targets checked, gradient in place.
// losses (n) = -log softmax(logits)[target]                            [=]
// if grad_scale != 0: logits (n, v) = grad_scale * (softmax - onehot(target))  [in place]
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float grad_scale);

}  // namespace mt
