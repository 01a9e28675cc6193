#include "optim/grad_sync.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mt {

GradSync::GradSync(ModelRuntime& rt, const ParallelState& ps, int64_t bucket_size_floats,
                   bool overlap, bool distributed, bool overlap_param_gather,
                   bool grad_reduce_in_bf16, bool shard_grads, bool shard_params)
    : rt_(rt), ps_(ps), overlap_param_gather_(overlap_param_gather) {
  MT_CHECK(!shard_grads || distributed,
           "sharded gradients need the distributed optimizer (internal error)");
  MT_CHECK(!shard_params || (shard_grads && !overlap_param_gather),
           "sharded weights need sharded gradients, without --overlap-param-gather (internal "
           "error: the arguments refuse the rest)");
  MT_CHECK(distributed || !overlap_param_gather,
           "--overlap-param-gather without --use-distributed-optimizer; fix: add "
           "--use-distributed-optimizer (only its parameter all-gather can overlap)");
  MT_CHECK(!grad_reduce_in_bf16 || rt.math() == MathMode::kBF16,
           "--grad-reduce-in-bf16 in a ", math_mode_name(rt.math()),
           " run; fix: add --bf16 (it rounds a bf16 run's gradients for the DP reduction)");
  // Gradients are averaged over DP x CP (CP ranks hold other tokens of the
  // same sequences), and the distributed optimizer shards over it.
  const std::vector<GradBucket>* dense = nullptr;  // the dense buckets, either kind
  const bool experts = rt.reg.group_begin(GradGroup::kExpertDataParallel) < rt.reg.total_floats();
  experts_ = experts;
  if (shard_grads) {
    staged_ = std::make_unique<StagedGrads>(rt, ps.dp_cp(), bucket_size_floats,
                                            experts ? &ps.edp_comm : nullptr, grad_reduce_in_bf16);
    dense = &staged_->buckets();
  } else {
    buckets_ = std::make_unique<GradBuckets>(rt.reg, rt.grads, ps.dp_cp(), bucket_size_floats,
                                             overlap, distributed, grad_reduce_in_bf16);
    dense = &buckets_->buckets();
  }
  if (shard_params)
    params_ = std::make_unique<StagedParams>(rt, *staged_);
  else if (distributed)
    gather_ = std::make_unique<ParamGather>(*dense, rt.params, rt.params_bf16, ps.dp_cp());
  // MoE experts: summed over the expert-data-parallel group (the ranks that
  // hold the same experts, each with other tokens), divided by DP x CP like
  // the dense ones; the distributed optimizer shards them over that group.
  if (experts && staged_) {
    if (!params_)  // (with optim_grads_params they are gathered with their part)
      expert_gather_ = std::make_unique<ParamGather>(
          staged_->buckets(GradGroup::kExpertDataParallel), rt.params, rt.params_bf16,
          ps.edp_comm);
  } else if (experts) {
    expert_buckets_ = std::make_unique<GradBuckets>(
        rt.reg, rt.grads, ps.edp_comm, bucket_size_floats, overlap, distributed,
        grad_reduce_in_bf16, GradGroup::kExpertDataParallel, ps.dp_cp_size);
    if (distributed)
      expert_gather_ = std::make_unique<ParamGather>(expert_buckets_->buckets(), rt.params,
                                                     rt.params_bf16, ps.edp_comm);
  }
  // Parts as the model reports them: -1 embeddings, l for decoder layer l,
  // total_layers for the loss head.
  const int64_t total = rt.total_layers();
  params_of_part_.resize(size_t(total + 2));
  buckets_of_part_.resize(size_t(total + 2));
  const auto& params = rt.reg.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t part = params[i].part_id(total);
    if (params[i].tied) word_embedding_ = int64_t(i);
    params_of_part_[size_t(part + 1)].push_back(i);
    std::vector<size_t>& bs = buckets_of_part_[size_t(part + 1)];
    if (params[i].grad_group != GradGroup::kDataParallel) continue;
    const size_t b = staged_ ? staged_->bucket_of(i) : buckets_->bucket_of(i);
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) bs.push_back(b);
  }
  for (std::vector<size_t>& bs : buckets_of_part_) std::sort(bs.rbegin(), bs.rend());
  part_done_.assign(params_of_part_.size(), false);
  hook_ = [this](int64_t part) { part_ready(part); };
  params_hook_ = [this](int64_t part) { part_needed(part); };
}

void GradSync::sum_sp_grads(size_t part_slot) {
  // With sequence parallelism every TP-replicated parameter's gradient is a
  // partial sum over this rank's rows; without it only those tagged
  // tp_partial_grad (per-head weights shared by the heads) are.
  const bool sp = rt_.sequence_parallel();
  for (size_t i : params_of_part_[part_slot]) {
    const ParamSpec& p = rt_.reg.params()[i];
    if (p.tp_replicated() && p.grad_group == GradGroup::kDataParallel &&
        (sp || p.tp_partial_grad) && ps_.tp_comm.size() > 1)
      ps_.tp_comm.all_reduce_sum(rt_.grad_of(i), p.numel());
  }
}

void GradSync::part_ready(int64_t part) {
  const size_t slot = size_t(part + 1);
  if (staged_) {  // every micro-batch: what the part's pool range received since its last reduction
    part_done_[slot] = true;
    sum_sp_grads(slot);
    staged_->reduce_part(part);
    return;
  }
  if (part_done_[slot]) return;
  part_done_[slot] = true;
  sum_sp_grads(slot);
  for (size_t i : params_of_part_[slot]) {
    if (rt_.reg.params()[i].grad_group == GradGroup::kDataParallel)
      buckets_->mark_ready(i);
    else
      expert_buckets_->mark_ready(i);
  }
}

void GradSync::part_needed(int64_t part) {
  if (params_) {
    params_->need(part);
    return;
  }
  if (gather_ == nullptr || !gather_->in_flight()) return;
  MT_CHECK(part >= -1 && size_t(part + 1) < buckets_of_part_.size(), "params_needed(", part,
           ") outside the model's parts -1 .. ", buckets_of_part_.size() - 2);
  for (size_t b : buckets_of_part_[size_t(part + 1)]) gather_->wait(b);
}

void GradSync::finish() {
  TimelineSpan span(ps_.timeline(), TimelineKind::kGradSync, "grad sync");
  wait_params();  // (the forward has waited already)
  if (staged_) {
    // Parts no backward reported this iteration (a last stage's copy of the
    // tied embedding, written by the loss head only) hold gradients still.
    for (int64_t part = int64_t(part_done_.size()) - 2; part >= -1; --part)
      if (!part_done_[size_t(part + 1)]) part_ready(part);
  } else {
    for (int64_t part = int64_t(part_done_.size()) - 2; part >= -1; --part) part_ready(part);
    buckets_->finish();
  }
  if (expert_buckets_) expert_buckets_->finish();
  part_done_.assign(part_done_.size(), false);
  // Tied input/output embedding on different stages: the first and the last
  // stage each hold a copy; summing their gradients keeps the copies equal.
  if (ps_.pp_size > 1 && ps_.embd_comm.size() > 1 && word_embedding_ >= 0) {
    const ParamSpec& p = rt_.reg.params()[size_t(word_embedding_)];
    if (staged_) {  // this rank's piece of the embedding's own bucket, in the shard
      const size_t b = staged_->bucket_of(size_t(word_embedding_));
      const int64_t at = staged_->shard_offset(b);
      if (at >= 0)
        ps_.embd_comm.all_reduce_sum(staged_->shard_grads() + at,
                                     staged_->buckets()[b].shard(ps_.dp_cp_rank).size());
      return;
    }
    int64_t begin = p.offset, end = p.offset + p.numel();
    if (distributed()) {  // this rank's piece of the embedding's own bucket
      const FlatRange mine =
          buckets_->buckets()[buckets_->bucket_of(size_t(word_embedding_))].shard(ps_.dp_cp_rank);
      begin = std::max(begin, mine.begin);
      end = std::max(begin, std::min(end, mine.end));
    }
    ps_.embd_comm.all_reduce_sum(rt_.grads + begin, end - begin);
  }
}

void GradSync::zero_grads() {
  rt_.zero_grads();
  if (staged_) staged_->zero();
}

std::vector<FlatRange> GradSync::optimizer_ranges() const {
  if (staged_) return staged_->owned_ranges();
  if (!distributed()) return {};
  std::vector<FlatRange> r = owned_ranges(buckets_->buckets(), ps_.dp_cp_rank);
  if (expert_buckets_) {  // after the dense ones (their range comes last)
    const std::vector<FlatRange> e = owned_ranges(expert_buckets_->buckets(), ps_.edp_rank);
    r.insert(r.end(), e.begin(), e.end());
  }
  return r;
}

void GradSync::attach(const AdamWOptimizer& opt) {
  if (params_) params_->attach(opt);
}

void GradSync::refresh_params() {
  if (params_) params_->refresh();
}

SavedWeights GradSync::weights_for_save(HostBuffer& tmp) const {
  return params_ ? SavedWeights{params_->gather_all(tmp)} : rt_.weights_to_save();
}

void GradSync::gather_params() {
  if (params_) {
    params_->invalidate();  // each part is gathered again when next read
    return;
  }
  if (gather_ == nullptr) return;
  if (expert_gather_) expert_gather_->gather();  // blocking (the forward does not wait for it)
  if (overlap_param_gather_)
    gather_->start();  // the forward waits bucket by bucket (part_needed)
  else
    gather_->gather();
}

void GradSync::wait_params() {
  if (gather_ != nullptr) gather_->wait_all();
}

double GradSync::comm_seconds() const {
  // Blocking calls are timed by the communicators themselves; overlapped
  // buckets by the time spent launching, testing and waiting on them.
  return ps_.tp_comm.busy_seconds() + ps_.dp_comm.busy_seconds() + ps_.embd_comm.busy_seconds() +
         (ps_.cp_size > 1 ? ps_.dp_cp_comm.busy_seconds() + ps_.cp_comm.busy_seconds() : 0.0) +
         (buckets_ && buckets_->overlap() ? buckets_->comm_seconds() : 0.0) +
         (buckets_ ? buckets_->convert_seconds() : 0.0) +
         (overlap_param_gather_ ? gather_->comm_seconds() : 0.0) +
         (experts_ ? ps_.edp_comm.busy_seconds() : 0.0) +
         (expert_buckets_ ? (expert_buckets_->overlap() ? expert_buckets_->comm_seconds() : 0.0) +
                                expert_buckets_->convert_seconds()
                          : 0.0);
}

void GradSync::reset_timers() {
  ps_.tp_comm.reset_busy_seconds();
  ps_.dp_comm.reset_busy_seconds();
  if (ps_.cp_size > 1) {
    ps_.dp_cp_comm.reset_busy_seconds();
    ps_.cp_comm.reset_busy_seconds();
  }
  ps_.embd_comm.reset_busy_seconds();
  if (buckets_) buckets_->reset_timers();
  if (staged_) staged_->reset_timers();
  if (params_) params_->reset_timers();
  if (gather_ != nullptr) gather_->reset_timers();
  if (experts_) ps_.edp_comm.reset_busy_seconds();
  if (expert_buckets_) expert_buckets_->reset_timers();
}

}  // namespace mt
