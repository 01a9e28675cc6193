#include "parallel/vocab_parallel_cross_entropy.h"

#include "kernels/cross_entropy.h"

namespace mt {

void vocab_parallel_cross_entropy(float* losses, float* logits, WriteView grad,
                                  const int32_t* targets, int64_t n, int64_t v_local,
                                  int64_t v_start, int64_t v_global, float grad_scale,
                                  const CrossEntropyScratch& scratch, const Communicator* tp,
                                  const float* row_scale) {
  check_targets(targets, n, v_global);
  if (tp == nullptr || tp->size() == 1) {  // nothing to all-reduce: row by row
    cross_entropy_rows(losses, logits, grad, targets, n, v_local, grad_scale, row_scale);
    return;
  }
  cross_entropy_shard_max(scratch.row_max, logits, n, v_local);
  if (tp != nullptr && tp->size() > 1) tp->all_reduce_max(scratch.row_max, n);
  cross_entropy_shard_sums(scratch.sum_exp, scratch.target_logit, logits, scratch.row_max,
                           targets, n, v_local, v_start, grad_scale != 0.f);
  if (tp != nullptr && tp->size() > 1) {
    tp->all_reduce_sum(scratch.sum_exp, n);
    tp->all_reduce_sum(scratch.target_logit, n);
  }
  cross_entropy_shard_finish(losses, grad, logits, scratch.sum_exp, scratch.target_logit,
                             targets, n, v_local, v_start, grad_scale, row_scale);
}

}  // namespace mt
