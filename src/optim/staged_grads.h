// Megatron-FSDP's optim_grads (ZeRO-2) gradients: reduce-scattered part by
// part as backward produces them, in every micro-batch, so that a rank never
// holds the model's whole gradient. It holds
//  - its data-parallel piece of every gradient bucket, accumulated over the
//    micro-batches in fp32 and packed in the distributed optimizer's segment
//    order (shard_grads(): AdamWOptimizer reads it with packed gradients), and
//  - a staging pool that the model's kernels write their gradients into
//    (ModelRuntime's GradPlacement, from plan_staged_grads): the embeddings
//    and the loss head each have a region of their own, because the output
//    layer's gradient (and the tied word embedding's) is written in forward
//    (the fused loss head) and the tied word embedding's also at the end of
//    backward; the decoder layers share one region the size of the largest
//    layer, each layer's gradients reduced before the next layer writes.
//
// Buckets are the distributed optimizer's (optim/grad_buckets.h: whole
// parameters, kShardAlign pieces, virtual padding), except that no bucket
// holds two parts (split_parts), so each part is reduced alone. A reduction
// is blocking: the bucket's pool range is reduce-scattered in place over the
// group, this rank's piece times 1/N is added to its shard, and the range is
// zeroed for the next writer. A part may be reduced any number of times per
// iteration; each reduction sums what the pool received since the last one.
// The optimizer's ranges, the parameter all-gather after the step
// (optim/param_gather.h) and the checkpoints are the distributed optimizer's,
// over these buckets. MoE experts: their own buckets over the expert-data-
// parallel group (their sum divided by DP x CP, as the dense ones'), their
// pool range after their layer's dense one, their pieces after the dense
// pieces in the shard (their parameters come after the dense ones).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/device.h"
#include "comm/communicator.h"
#include "model/model_runtime.h"
#include "optim/grad_buckets.h"

namespace mt {

// Where each parameter's gradient lives in the staging pool (see above), and
// for optim_grads_params its weights (a second layer region for odd layers).
GradPlacement plan_staged_grads(const ParamRegistry& reg);

class StagedGrads {
 public:
  // rt: built with plan_staged_grads(rt.reg) (its gradients live in the pool).
  // dp: the group the dense gradients are summed over (DP x CP) and sharded
  // on; edp: the experts' (expert DP; null without experts). Both sums are
  // divided by dp's size. rt, dp and edp must outlive this object.
  // reduce_in_bf16 (Megatron's --grad-reduce-in-bf16): each bucket is rounded
  // to bf16 in place in the pool and reduce-scattered as bf16 (half the
  // bytes); the piece is widened back and accumulated in fp32.
  StagedGrads(ModelRuntime& rt, const Communicator& dp, int64_t bucket_size_floats,
              const Communicator* edp = nullptr, bool reduce_in_bf16 = false);

  const std::vector<GradBucket>& buckets(GradGroup g = GradGroup::kDataParallel) const {
    return group(g).buckets;
  }
  // Parameter i's bucket among its group's buckets.
  size_t bucket_of(size_t param) const { return bucket_of_[param]; }
  // This rank's pieces of the buckets (flat-buffer offsets, the dense ones
  // then the experts', each sorted): the optimizer's ranges; shard_grads()
  // holds their gradients in this order.
  std::vector<FlatRange> owned_ranges() const;

  // Reduces the buckets of `part` (-1 embeddings, l layer l, total layers
  // the loss head) from the pool into the shard (see above). Collective over
  // dp (and edp when the part has experts).
  void reduce_part(int64_t part);
  // shard = 0: before an iteration's first micro-batch (the pool is zero
  // after every reduction; ModelRuntime::zero_grads clears it too).
  void zero();

  float* shard_grads() const { return shard_; }
  int64_t shard_floats() const { return shard_floats_; }
  const DeviceBuffer& shard_buffer() const { return shard_buf_; }
  // Offset in shard_grads() of this rank's piece of dense bucket b (-1: empty piece).
  int64_t shard_offset(size_t b) const { return dense_.shard_offset[b]; }
  // The same for either group, and each group's buckets of `part` and its
  // communicator (null: no such group): what the weights of
  // optim_grads_params are gathered by (optim/staged_params.h).
  int64_t shard_offset(GradGroup g, size_t b) const { return group(g).shard_offset[b]; }
  const std::vector<size_t>& part_buckets(GradGroup g, int64_t part) const {
    return group(g).of_part[size_t(part + 1)];
  }
  const Communicator* comm(GradGroup g) const { return group(g).comm; }
  int64_t num_parts() const { return int64_t(dense_.of_part.size()); }  // parts -1 .. total

  // Bytes handed to the reductions since reset_timers() (elements x 4, or x 2 in bf16).
  int64_t reduced_bytes() const { return reduced_bytes_; }
  void reset_timers() { reduced_bytes_ = 0; }

 private:
  struct Group {
    const Communicator* comm = nullptr;
    std::vector<GradBucket> buckets;
    std::vector<float*> pool;                  // per bucket: its first float in the pool
    std::vector<int64_t> shard_offset;         // per bucket: its piece in the shard, or -1
    std::vector<std::vector<size_t>> of_part;  // index part + 1: the part's buckets
  };
  const Group& group(GradGroup g) const {
    return g == GradGroup::kDataParallel ? dense_ : experts_;
  }
  void plan_group(Group& g, ModelRuntime& rt, GradGroup id, int64_t bucket_size_floats);
  void reduce(Group& g, int64_t part);

  Group dense_, experts_;
  std::vector<size_t> bucket_of_;  // per parameter
  float inv_;                      // 1 / (DP x CP)
  bool reduce_in_bf16_;
  DeviceBuffer shard_buf_;
  float* shard_ = nullptr;
  int64_t shard_floats_ = 0;
  int64_t reduced_bytes_ = 0;
};

}  // namespace mt
