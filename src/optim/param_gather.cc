#include "optim/param_gather.h"

#include "core/error.h"
#include "core/log.h"

namespace mt {

ParamGather::ParamGather(const std::vector<GradBucket>& buckets, float* params,
                         uint16_t* params_bf16, const Communicator& dp)
    : buckets_(buckets),
      params_(params),
      params_bf16_(params_bf16),
      dp_(&dp),
      handles_(buckets.size()) {
  MT_CHECK((params == nullptr) != (params_bf16 == nullptr),
           "ParamGather: give the fp32 or the bf16 weight buffer, exactly one (internal error)");
  MT_CHECK(dp.is_member(), "ParamGather on group '", dp.name(),
           "', which this rank is not a member of; fix: pass this rank's data-parallel group");
  for (const GradBucket& bk : buckets)
    MT_CHECK(int(bk.shards.counts.size()) == dp.size(), "ParamGather: the bucket at ", bk.begin,
             " has ", bk.shards.counts.size(), " DP pieces but the group '", dp.name(),
             "' has ", dp.size(), " ranks; fix: plan the buckets with dp_shards = the DP size");
}

void ParamGather::gather() {
  wait_all();
  Timer t;
  for (const GradBucket& bk : buckets_) {
    if (params_bf16_)
      dp_->all_gather_in_place(params_bf16_ + bk.begin, bk.shards);
    else
      dp_->all_gather_in_place(params_ + bk.begin, bk.shards);
  }
  comm_seconds_ += t.seconds();
}

void ParamGather::start() {
  wait_all();
  if (dp_->size() == 1) return;
  Timer t;
  for (size_t b = buckets_.size(); b-- > 0;) {  // the forward's order: embeddings first
    const GradBucket& bk = buckets_[b];
    handles_[b] = params_bf16_ ? dp_->start_all_gather_in_place(params_bf16_ + bk.begin, bk.shards)
                               : dp_->start_all_gather_in_place(params_ + bk.begin, bk.shards);
    ++in_flight_;
  }
  comm_seconds_ += t.seconds();
}

void ParamGather::wait(size_t b) {
  MT_CHECK(b < handles_.size(), "ParamGather::wait(", b, ") but there are ", handles_.size(),
           " buckets");
  if (in_flight_ == 0) return;
  Timer t;
  if (handles_[b].pending()) {
    handles_[b].wait();
    --in_flight_;
  }
  // Let MPI progress the next bucket the forward will need (lower index).
  for (size_t n = b; n-- > 0;)
    if (handles_[n].pending()) {
      if (handles_[n].test()) --in_flight_;
      break;
    }
  comm_seconds_ += t.seconds();
}

void ParamGather::wait_all() {
  if (in_flight_ == 0) return;
  Timer t;
  for (size_t b = buckets_.size(); b-- > 0;) handles_[b].wait();
  in_flight_ = 0;
  comm_seconds_ += t.seconds();
}

}  // namespace mt
