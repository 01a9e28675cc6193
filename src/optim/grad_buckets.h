// Data-parallel gradient reduction in buckets, overlapped with backward:
// Megatron-LM's DistributedDataParallel / _ParamAndGradBuffer, all-reduce
// flavour (the distributed optimizer's reduce-scatter reuses the same layout).
//
// Layout. The gradients live in one flat buffer (ParamRegistry::offset, 64-byte
// aligned, registry order: embeddings, layers, final norm). Buckets are
// contiguous ranges of that buffer holding whole parameters, formed in
// *reverse* registry order, because backward produces the last layers'
// gradients first: bucket 0 ends at total_floats() and holds the final norm and
// the last layer's tensors. A bucket's range includes the alignment padding
// after its parameters, so the buckets tile the whole buffer without gaps.
// A bucket is closed when it reaches bucket_size_floats, and a parameter that
// would take it past that size starts the next bucket instead; so no bucket
// is larger than bucket_size_floats unless it holds one parameter that alone
// is larger. (Megatron lets the parameter that crosses the size stay in the
// bucket; we keep the limit strict so it can bound a communication buffer.)
//
// Use per iteration (one object for the whole run; no allocation per step):
//   for each micro-batch: forward, backward
//     during the last micro-batch's backward: mark_ready(i) once the gradient
//     of parameter i is final
//   finish()  // every bucket reduced, grads = average over DP (`=`)
// With overlap on, a bucket's non-blocking all-reduce (MPI_Iallreduce) starts
// as soon as all its parameters are ready, so communication runs behind the
// rest of backward. MPI requires non-blocking collectives on one communicator
// to be started in the same order on every rank, so bucket k is launched only
// after buckets 0..k-1: a bucket that becomes complete early waits in line.
// Open MPI progresses non-blocking collectives only inside MPI calls, so
// mark_ready also tests the oldest in-flight bucket.
//
// mark_ready and finish make MPI calls: call them from the thread that
// initialised MPI (MPI_THREAD_FUNNELED), never inside an OpenMP region.
// With dp.size() == 1 nothing is communicated or scaled (the bookkeeping and
// its checks still run).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/params.h"

namespace mt {

struct GradBucket {
  int64_t begin = 0, end = 0;  // float offsets [begin, end) in the flat gradient buffer
  std::vector<size_t> params;  // registry indices, in the order added (descending)
  int64_t numel() const { return end - begin; }
};

// The bucket layout of `reg` (see above); bucket_size_floats > 0.
std::vector<GradBucket> plan_grad_buckets(const ParamRegistry& reg, int64_t bucket_size_floats);

class GradBuckets {
 public:
  // grads: (reg.total_floats()), the flat gradient buffer; it and `dp` must
  // outlive this object. bucket_size_floats: Megatron's --ddp-bucket-size
  // (elements), whose default there is max(40'000'000, 1'000'000 * dp).
  GradBuckets(const ParamRegistry& reg, float* grads, const Communicator& dp,
              int64_t bucket_size_floats, bool overlap);
  ~GradBuckets();  // waits for any bucket still in flight
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  size_t bucket_of(size_t param_index) const { return bucket_of_[param_index]; }
  bool overlap() const { return overlap_; }
  // Buckets launched so far in this iteration (0 .. buckets().size()).
  size_t num_launched() const { return next_launch_; }

  // The gradient of parameter `param_index` is final for this iteration.
  // Throws mt::Error if it was already marked since the last finish().
  void mark_ready(size_t param_index);
  // Launches the buckets not launched yet (in order), waits for all, then
  // grads = grads_summed_over_dp / dp (`=`), and clears the ready flags.
  // Parameters never marked are fine: their buckets are reduced here.
  void finish();

  // Seconds spent inside this object's MPI calls (launch, test, wait) since
  // the last reset_timers(): the "time in DP communication" of a report.
  double comm_seconds() const { return comm_seconds_; }
  void reset_timers() { comm_seconds_ = 0; }

 private:
  void launch_queued();  // launches complete buckets in order, while possible
  void poll();           // MPI_Test on the oldest bucket in flight

  std::vector<GradBucket> buckets_;
  std::vector<std::string> names_;   // per parameter, for messages
  std::vector<size_t> bucket_of_;    // per parameter
  std::vector<char> ready_;          // per parameter, this iteration
  std::vector<size_t> missing_;      // per bucket: parameters not yet ready
  std::vector<CommHandle> handles_;  // per bucket (pending while in flight)
  float* grads_;
  const Communicator* dp_;
  bool overlap_;
  bool communicate_;        // dp size > 1
  size_t next_launch_ = 0;  // buckets [0, next_launch_) are launched
  size_t next_done_ = 0;    // buckets [0, next_done_) are known complete
  double comm_seconds_ = 0;
};

}  // namespace mt
