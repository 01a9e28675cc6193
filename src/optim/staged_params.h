// Megatron-FSDP's optim_grads_params (ZeRO-3) weights. This rank keeps only
// its pieces of the weights — the pieces of its gradient shard
// (optim/staged_grads.h), in the distributed optimizer's state order — and
// the model reads its weights from a pool laid out as the gradients' pool
// (ModelRuntime with staged weights): before a part's forward, its backward
// and a recomputed forward (PassContext::params_needed), the part's weights
// are all-gathered into its region unless the region holds them already. The
// embeddings and the loss head have regions of their own and stay until the
// optimizer step, after which every region is stale. The decoder layers take
// turns in two regions (even and odd layers, twice per micro-batch: forward,
// then backward): when layer l is needed, the gather of the layer expected
// next (l - 1 after a step down or a repeated need — backward, which starts on
// the layer the forward or a recompute ended on — else l + 1) is started,
// non-blocking, into the other region, so that it runs while l computes;
// need() waits for it. A wrong guess (the last layer of a recomputed group,
// the last layer of a stage) only costs a gather. exposed_seconds()
// is the time need() blocked: the gathering the computation did not hide.
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
  // After the optimizer step (and before a checkpoint reads the pieces): the
  // gathers in flight finished, every region stale.
  void invalidate();

  // The bf16 pieces the optimizer step writes (packed), null in fp32 runs.
  uint16_t* shard_bf16() const { return shard_bf16_; }
  const DeviceBuffer& shard_buffer() const { return shard_buf_; }
  // Every weight gathered into `full` (allocated here: registry offsets, the
  // model's element type): the view a checkpoint save writes. Collective.
  ReadView gather_all(HostBuffer& full);

  // Seconds need() blocked (gathering, or waiting for a prefetch) and the
  // parts it gathered, and of those the ones a prefetch had started, since
  // reset_timers().
  double exposed_seconds() const { return exposed_seconds_; }
  int64_t gathers() const { return gathers_; }
  int64_t prefetched() const { return prefetched_; }
  void reset_timers() { exposed_seconds_ = 0, gathers_ = prefetched_ = 0; }

 private:
  static constexpr int64_t kNone = INT64_MIN;
  // Copies this rank's piece of bucket b of group g into dst (its range:
  // bucket-relative pieces); the gathers below then fill in the others',
  // blocking, or (start) returning the handle of the non-blocking gather.
  void copy_piece(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const;
  void gather_bucket(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const;
  CommHandle start_bucket(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const;
  // part's buckets into their region (from the pool's placement): all
  // blocking, or started into in_flight_[region].
  void gather_part(int64_t part, bool start);
  size_t region_of(int64_t part) const;
  bool is_layer_here(int64_t part) const;  // a decoder layer this rank holds

  ModelRuntime& rt_;
  const StagedGrads& grads_;
  const float* main_ = nullptr;  // the optimizer's fp32 pieces
  DeviceBuffer shard_buf_;       // bf16 runs: the bf16 pieces
  uint16_t* shard_bf16_ = nullptr;
  // Per region (embeddings, loss head, even layers, odd layers): the part it
  // holds (or is being gathered into it), and that gather's handles.
  std::vector<int64_t> holds_;
  std::vector<std::vector<CommHandle>> in_flight_;
  int64_t last_layer_ = kNone;  // the layer last needed (the direction of the next)
  double exposed_seconds_ = 0;
  int64_t gathers_ = 0, prefetched_ = 0;
};

}  // namespace mt
