// Data-parallel gradient reduction in buckets, overlapped with backward:
// Megatron-LM's DistributedDataParallel / _ParamAndGradBuffer, all-reduce
// flavour, and the distributed optimizer's (ZeRO-1) reduce-scatter flavour.
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
// Distributed optimizer (plan_grad_buckets with dp_shards = DP > 0). The same
// buckets, except that the word embedding gets a bucket of its own (Megatron's
// rule for the shared embedding: the first and the last pipeline stage then
// cut its gradient into the same DP pieces, so the tied-embedding all-reduce
// can follow the reduce-scatter). Each bucket's size is padded up to a
// multiple of kShardAlign·DP floats and cut into DP equal pieces of
// padded/DP floats: DP rank r owns the r-th piece [begin + r·padded/DP, ...),
// cut at the bucket's end, so the last rank(s) own less (or nothing) when the
// bucket is not a multiple. The padding is virtual: it lies past the bucket's
// end and is never stored or sent, because the reductions are MPI's
// v-collectives (MPI_Reduce_scatter / MPI_Allgatherv take a count per rank).
// So the flat parameter and gradient buffers, the ParamRegistry offsets and
// everything of a run without the distributed optimizer stay as they are,
// and no padded copy of the gradients is needed. Pieces start 64-byte aligned
// (buckets start at a parameter, and kShardAlign is 16 floats). finish()
// then leaves in this rank's piece of every bucket the DP average (`=`); the
// rest of the gradient buffer is scratch (undefined) until zeroed.
//
// bf16 reduction (Megatron's --grad-reduce-in-bf16; reduce_in_bf16 = true).
// Gradients still accumulate in fp32 and the optimizer reads fp32; only the
// wire format changes. Just before its collective a bucket's fp32 gradients
// are rounded to bf16 in place, into the first half of the bucket's own
// bytes (kernels/bf16_in_place.h), and reduced as bf16 (Communicator's *_bf16
// collectives: fp32 sums rounded once per pairwise addition), half the bytes.
// After the wait the sum is widened back to fp32 into the bucket, times 1/DP
// as in the fp32 path — the whole bucket (all-reduce) or this rank's piece
// (reduce-scatter: the bf16 piece r sits at the same element offsets as the
// fp32 piece r, so element i goes from byte 2i to byte 4i of the bucket); the
// rest of the bucket is then scratch, as above. No other buffer is used.
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

#include "comm/communicator.h"
#include "model/params.h"

namespace mt {

// Floats of a contiguous range [begin, end) of the flat parameter / gradient buffers.
struct FlatRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Distributed optimizer: pieces are multiples of this many floats (64 bytes).
constexpr int64_t kShardAlign = 16;

struct GradBucket {
  int64_t begin = 0, end = 0;  // float offsets [begin, end) in the flat gradient buffer
  std::vector<size_t> params;  // registry indices, in the order added (descending)
  int64_t numel() const { return end - begin; }
  // Distributed optimizer only (else padded == 0 and shards empty): numel
  // rounded up to a multiple of kShardAlign·DP, and the DP pieces relative to
  // begin (chunk r = [r·padded/DP, ...) cut at numel; empty past the end).
  int64_t padded = 0;
  ChunkSplit shards;
  FlatRange shard(int dp_rank) const {  // in flat-buffer offsets
    const int64_t b = begin + shards.displs[size_t(dp_rank)];
    return {b, b + shards.counts[size_t(dp_rank)]};
  }
};

// The bucket layout of `reg` (see above); bucket_size_floats > 0. With
// dp_shards > 0, the distributed optimizer's layout for DP = dp_shards.
// Only the parameters of `group` (each group's parameters are contiguous).
// split_parts: no bucket holds parameters of two parts (embeddings, a layer,
// the loss head: ParamSpec::part_id), so each part's gradients can be
// reduced on their own as backward produces them (optim/staged_grads.h).
std::vector<GradBucket> plan_grad_buckets(const ParamRegistry& reg, int64_t bucket_size_floats,
                                          int dp_shards = 0,
                                          GradGroup group = GradGroup::kDataParallel,
                                          bool split_parts = false);
// This DP rank's piece of every bucket (distributed layout), sorted by
// offset (the reverse of bucket order); empty pieces left out.
std::vector<FlatRange> owned_ranges(const std::vector<GradBucket>& buckets, int dp_rank);

class GradBuckets {
 public:
  // grads: (reg.total_floats()), the flat gradient buffer; it and `dp` must
  // outlive this object. bucket_size_floats: Megatron's --ddp-bucket-size
  // (elements), whose default there is max(40'000'000, 1'000'000 * dp).
  // distributed: reduce-scatter into this rank's pieces instead of all-reduce.
  // reduce_in_bf16: the reductions move bf16 (see above).
  // group: the parameters these buckets hold (the expert ones are reduced
  // over the expert-data-parallel group); average_over: the replicas the sum
  // is divided by (0: dp's size; experts: DP x CP, also when dp is smaller).
  GradBuckets(const ParamRegistry& reg, float* grads, const Communicator& dp,
              int64_t bucket_size_floats, bool overlap, bool distributed = false,
              bool reduce_in_bf16 = false, GradGroup group = GradGroup::kDataParallel,
              int64_t average_over = 0);
  ~GradBuckets();  // waits for any bucket still in flight
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  size_t bucket_of(size_t param_index) const { return bucket_of_[param_index]; }
  bool overlap() const { return overlap_; }
  bool distributed() const { return distributed_; }
  bool reduce_in_bf16() const { return reduce_in_bf16_; }
  // Buckets launched so far in this iteration (0 .. buckets().size()).
  size_t num_launched() const { return next_launch_; }

  // The gradient of parameter `param_index` is final for this iteration.
  // Throws mt::Error if it was already marked since the last finish().
  void mark_ready(size_t param_index);
  // Launches the buckets not launched yet (in order), waits for all, then
  // grads = grads_summed_over_dp / dp (`=`; distributed: in this rank's
  // pieces only, see above), and clears the ready flags.
  // Parameters never marked are fine: their buckets are reduced here.
  void finish();

  // Seconds spent inside this object's MPI calls (launch, test, wait) since
  // the last reset_timers(): the "time in DP communication" of a report.
  double comm_seconds() const { return comm_seconds_; }
  // Seconds spent rounding to bf16 and widening back (reduce_in_bf16 only).
  double convert_seconds() const { return convert_seconds_; }
  // Bytes handed to DP collectives (elements of the buckets reduced × 4, or
  // × 2 in bf16): what each rank contributes to the wire, halved by bf16.
  int64_t reduced_bytes() const { return reduced_bytes_; }
  // Zeroes the three counters above.
  void reset_timers() {
    comm_seconds_ = convert_seconds_ = 0;
    reduced_bytes_ = 0;
  }

 private:
  void launch_queued();  // launches complete buckets in order, while possible
  void poll();           // MPI_Test on the oldest bucket in flight
  CommHandle start(size_t b);  // non-blocking reduction of bucket b
  void reduce(size_t b);       // blocking reduction of bucket b
  // Before bucket b's collective: counts its bytes and, in bf16, rounds it.
  // Returns the bf16 array (reduce_in_bf16) or null.
  uint16_t* prepare(size_t b);
  void average(size_t b);      // the DP average of what this rank keeps of bucket b

  std::vector<GradBucket> buckets_;
  std::vector<std::string> names_;   // per parameter, for messages
  std::vector<size_t> bucket_of_;    // per parameter
  std::vector<char> ready_;          // per parameter, this iteration
  std::vector<size_t> missing_;      // per bucket: parameters not yet ready
  std::vector<CommHandle> handles_;  // per bucket (pending while in flight)
  float* grads_;
  const Communicator* dp_;
  float inv_;  // 1 / the replicas averaged over
  bool overlap_;
  bool distributed_;
  bool reduce_in_bf16_;
  bool communicate_;        // dp size > 1
  size_t next_launch_ = 0;  // buckets [0, next_launch_) are launched
  size_t next_done_ = 0;    // buckets [0, next_done_) are known complete
  double comm_seconds_ = 0;
  double convert_seconds_ = 0;
  int64_t reduced_bytes_ = 0;
};

}  // namespace mt
