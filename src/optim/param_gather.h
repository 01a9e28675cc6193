// The distributed optimizer's parameter all-gather (Megatron's
// DistributedOptimizer._param_all_gather / --overlap-param-gather). After the
// step each DP rank holds updated values only in its piece of every bucket
// (optim/grad_buckets.h); an in-place all-gather over DP per bucket gives
// every rank the whole parameter buffer again — the model's weights as it
// stores them: fp32, or bf16 in bf16 runs (half the traffic; the fp32 main
// weights stay sharded in the optimizer).
//
// Blocking: gather(). Overlapped: start() launches every bucket's
// non-blocking all-gather (MPI_Iallgatherv) in the order the next forward
// needs them — the last bucket (the embeddings) first — and the forward calls
// wait(b) just before it reads a parameter of bucket b. Anything else that
// reads the parameters (evaluation, checkpoint save, the end of the run) calls
// wait_all() first. Every rank starts the buckets in the same order, as MPI
// requires of non-blocking collectives on one communicator.
//
// Like GradBuckets, make the calls from the thread that initialised MPI,
// never inside an OpenMP region. With DP = 1 nothing is communicated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "optim/grad_buckets.h"

namespace mt {

class ParamGather {
 public:
  // buckets: the distributed layout (plan_grad_buckets with dp_shards =
  // dp.size()); params or params_bf16 (exactly one; total elements, the
  // registry's offsets): the model's flat weight buffer. All must outlive
  // this object.
  ParamGather(const std::vector<GradBucket>& buckets, float* params, uint16_t* params_bf16,
              const Communicator& dp);
  ~ParamGather() = default;  // each pending CommHandle waits in its destructor
  ParamGather(const ParamGather&) = delete;
  ParamGather& operator=(const ParamGather&) = delete;

  void gather();  // blocking: every bucket's params = the pieces of all ranks (`=`)
  void start();   // the same, non-blocking; waits for any gather still in flight first
  // Waits for bucket b's all-gather (at once if none is in flight), and tests
  // the next one in flight so that MPI progresses it meanwhile.
  void wait(size_t b);
  void wait_all();
  bool in_flight() const { return in_flight_ > 0; }

  // Seconds inside this object's MPI calls since the last reset_timers().
  double comm_seconds() const { return comm_seconds_; }
  void reset_timers() { comm_seconds_ = 0; }

 private:
  const std::vector<GradBucket>& buckets_;
  float* params_;
  uint16_t* params_bf16_;
  const Communicator* dp_;
  std::vector<CommHandle> handles_;  // per bucket
  size_t in_flight_ = 0;             // buckets started and not yet waited for
  double comm_seconds_ = 0;
};

}  // namespace mt
