// Megatron-FSDP's optim_grads_params (ZeRO-3) weights. This rank keeps only
// its pieces of the weights — the pieces of its gradient shard
// (optim/staged_grads.h), in the distributed optimizer's state order — and
// the model reads its weights from a pool laid out as the gradients' pool
// (ModelRuntime with staged weights): before a part's forward, its backward
// and a recomputed forward (PassContext::params_needed), the part's weights
// are all-gathered into its region unless the region holds them already. The
// decoder layers share one region and are gathered in turn (twice per
// micro-batch and layer: forward, then backward); the embeddings and the loss
// head have regions of their own and stay until the optimizer step, after
// which every region is stale. The gathers are blocking.
//
// The pieces: in fp32 runs the optimizer's fp32 main weights are the model's
// weights (AdamWOptimizer with main weights and packed parameters: nothing
// else is stored); in bf16 runs a bf16 shard beside them, which the step
// writes (the main weights rounded) and the gathers move (half the bytes).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/device.h"
#include "core/arena.h"
#include "model/model_runtime.h"
#include "optim/optimizer.h"
#include "optim/staged_grads.h"

namespace mt {

class StagedParams {
 public:
  // rt: built with staged weights in grads' placement; grads: its buckets
  // and pieces. Both must outlive this object.
  StagedParams(ModelRuntime& rt, const StagedGrads& grads);

  // The optimizer (with main weights, packed): its main weights are the fp32
  // pieces. Before the first need().
  void attach(const AdamWOptimizer& opt);
  // After initialisation or loading set the main weights: the bf16 pieces =
  // them rounded (bf16 runs), and every region stale.
  void refresh();
  // Gathers part's weights into its region unless it holds them (see above).
  // Collective over the part's groups.
  void need(int64_t part);
  // After the optimizer step: every region stale.
  void invalidate() { std::fill(holds_.begin(), holds_.end(), kNone); }

  // The bf16 pieces the optimizer step writes (packed), null in fp32 runs.
  uint16_t* shard_bf16() const { return shard_bf16_; }
  const DeviceBuffer& shard_buffer() const { return shard_buf_; }
  // Every weight gathered into `full` (allocated here: registry offsets, the
  // model's element type): the view a checkpoint save writes. Collective.
  ReadView gather_all(HostBuffer& full) const;

 private:
  static constexpr int64_t kNone = INT64_MIN;
  // Gathers bucket b of group g into dst (its range: bucket-relative pieces).
  void gather_bucket(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const;
  size_t region_of(int64_t part) const;

  ModelRuntime& rt_;
  const StagedGrads& grads_;
  const float* main_ = nullptr;  // the optimizer's fp32 pieces
  DeviceBuffer shard_buf_;       // bf16 runs: the bf16 pieces
  uint16_t* shard_bf16_ = nullptr;
  std::vector<int64_t> holds_;  // per region (embeddings, loss head, layers): the part held
};

}  // namespace mt
