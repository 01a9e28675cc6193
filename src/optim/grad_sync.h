// Data-parallel synchronisation around the optimizer step, driven by the
// model's hooks (PassContext::grads_ready in the last micro-batch's backward,
// PassContext::params_needed in forward):
//   1. with sequence parallelism, parameters replicated over TP (LayerNorms,
//      row-parallel biases, position embeddings) saw only this rank's slab:
//      their gradients are summed over TP (Megatron's _allreduce_layernorm_grads);
//   2. the DP average in buckets (optim/grad_buckets), started as soon as a
//      bucket is complete when --overlap-grad-reduce is on: an all-reduce, or
//      with --use-distributed-optimizer a reduce-scatter into this rank's
//      piece of each bucket; with --grad-reduce-in-bf16 (bf16 runs) both move
//      bf16, rounded from and widened back to the fp32 gradients in place;
//   3. the tied word embedding's gradient summed over the embedding group
//      (first and last pipeline stage; distributed: this rank's piece only —
//      the embedding has a bucket of its own, cut alike on both stages), in
//      fp32 always (also with --grad-reduce-in-bf16: after the widening);
//   2'. with Megatron-FSDP's optim_grads (shard_grads) instead: in every
//      micro-batch each part's gradients reduce-scattered as backward
//      produces them into this rank's shard (optim/staged_grads.h), the
//      model's gradients living in a staging pool; the optimizer reads the
//      shard (optimizer_grads(), packed);
//   2''. with optim_grads_params (shard_params) the weights too: each part's
//      gathered before it is read (optim/staged_params.h, params_hook());
//   4. distributed optimizer, after the step: the all-gather of the updated
//      parameters (optim/param_gather), blocking, or with
//      --overlap-param-gather started at once and waited per bucket by the
//      next forward (params_hook()). It moves the model's weights as stored:
//      bf16 in bf16 runs (the optimizer's step wrote this rank's pieces).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/parallel_state.h"
#include "model/model_runtime.h"
#include "optim/grad_buckets.h"
#include "optim/param_gather.h"
#include "optim/staged_grads.h"
#include "optim/staged_params.h"

namespace mt {

class GradSync {
 public:
  // distributed: Megatron's --use-distributed-optimizer; overlap_param_gather:
  // its --overlap-param-gather (needs distributed); grad_reduce_in_bf16: its
  // --grad-reduce-in-bf16 (the DP buckets reduce in bf16; needs a bf16 rt).
  // shard_grads: Megatron-FSDP's optim_grads (needs distributed, and rt built
  // with plan_staged_grads); shard_params: its optim_grads_params (needs
  // shard_grads, rt's weights staged too, and attach() once the optimizer exists).
  GradSync(ModelRuntime& rt, const ParallelState& ps, int64_t bucket_size_floats,
           bool overlap, bool distributed = false, bool overlap_param_gather = false,
           bool grad_reduce_in_bf16 = false, bool shard_grads = false,
           bool shard_params = false);

  // The hook for the last micro-batch's backward (PassContext::grads_ready).
  const std::function<void(int64_t)>& hook() const { return hook_; }
  // The hook for every forward and backward (PassContext::params_needed):
  // waits for the all-gathers of the part's buckets (--overlap-param-gather),
  // or gathers the part's weights (optim_grads_params). Null otherwise.
  const std::function<void(int64_t)>* params_hook() const {
    return overlap_param_gather_ || params_ ? &params_hook_ : nullptr;
  }
  // Completes whatever the hook did not: after backward, before the grad norm.
  void finish();

  bool distributed() const { return staged_ != nullptr || buckets_->distributed(); }
  // optim_grads: the hook runs in every micro-batch's backward, not only the last.
  bool every_micro_batch() const { return staged_ != nullptr; }
  // The gradients the optimizer reads: the model's buffer (registry offsets),
  // or with optim_grads this rank's shard, packed in segment order.
  float* optimizer_grads() const { return staged_ ? staged_->shard_grads() : rt_.grads; }
  bool packed_grads() const { return staged_ != nullptr; }
  // Before an iteration: the model's gradients (and the shard) = 0.
  void zero_grads();
  // The shard (optim_grads), else null: its memory is the gradients' too.
  const StagedGrads* staged() const { return staged_.get(); }
  // optim_grads_params: the weights' pieces (null otherwise).
  const StagedParams* staged_params() const { return params_.get(); }
  // optim_grads_params: once the optimizer exists (its main weights are the
  // pieces), and after initialising or loading them (refresh_params).
  void attach(const AdamWOptimizer& opt);
  void refresh_params();
  // What the optimizer step writes: the model's weights (fp32, or bf16 in
  // bf16 runs), or with optim_grads_params the bf16 pieces (fp32: nothing).
  float* step_params() const { return params_ ? nullptr : rt_.params; }
  uint16_t* step_params_bf16() const { return params_ ? params_->shard_bf16() : rt_.params_bf16; }
  // The weights in registry offsets for a checkpoint save: the model's, or
  // with optim_grads_params all of them gathered into `tmp`. Collective.
  SavedWeights weights_for_save(HostBuffer& tmp) const;
  // The ranges of the flat buffers this rank's optimizer updates: its piece
  // of every bucket (distributed), or empty = everything (plain AdamW).
  std::vector<FlatRange> optimizer_ranges() const;
  // After the optimizer step. Distributed: all-gathers the updated
  // weights over DP (blocking, or started with --overlap-param-gather).
  void gather_params();
  // Waits for every all-gather in flight: before anything but the training
  // forward reads the parameters (evaluation, checkpoint save, end of run).
  void wait_params();

  // Seconds in TP and DP communication (the model's TP collectives included,
  // and with --grad-reduce-in-bf16 the rounding and widening of the buckets)
  // since the last reset_timers().
  double comm_seconds() const;
  // Bytes of gradients this rank handed to the DP reduction since the last
  // reset_timers() (GradBuckets::reduced_bytes: halved by bf16).
  int64_t dp_grad_bytes() const {
    return staged_ ? staged_->reduced_bytes() : buckets_->reduced_bytes();
  }
  void reset_timers();

 private:
  void part_ready(int64_t part);
  void sum_sp_grads(size_t part_slot);  // SP: TP-replicated gradients summed over TP
  void part_needed(int64_t part);

  ModelRuntime& rt_;
  const ParallelState& ps_;
  bool overlap_param_gather_;
  std::unique_ptr<GradBuckets> buckets_;  // null with optim_grads
  std::unique_ptr<StagedGrads> staged_;   // optim_grads only
  std::unique_ptr<StagedParams> params_;  // optim_grads_params only
  std::unique_ptr<ParamGather> gather_;  // distributed only
  std::unique_ptr<GradBuckets> expert_buckets_;   // MoE experts, over expert DP
  std::unique_ptr<ParamGather> expert_gather_;    // distributed MoE only
  bool experts_ = false;                          // the model has MoE experts
  int64_t word_embedding_ = -1;          // registry index of the tied embedding, if held
  std::vector<std::vector<size_t>> params_of_part_;   // index: part + 1 (part -1 = embedding)
  std::vector<std::vector<size_t>> buckets_of_part_;  // the same, bucket indices (descending)
  std::vector<bool> part_done_;
  std::function<void(int64_t)> hook_, params_hook_;
};

}  // namespace mt
