#include "optim/grad_buckets.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/log.h"
#include "kernels/reduce.h"
#include "kernels/bf16_in_place.h"

namespace mt {

std::vector<GradBucket> plan_grad_buckets(const ParamRegistry& reg, int64_t bucket_size_floats,
                                          int dp_shards, GradGroup group, bool split_parts) {
  MT_CHECK(bucket_size_floats > 0, "DP bucket size is ", bucket_size_floats,
           " floats; fix: pass a positive --ddp-bucket-size (Megatron's default is "
           "max(40000000, 1000000 * dp))");
  const std::vector<ParamSpec>& ps = reg.params();
  std::vector<GradBucket> out;
  const int64_t total_layers = reg.config().num_layers;
  GradBucket cur;
  int64_t cur_part = 0;  // the part of cur's parameters (split_parts)
  auto close = [&] {
    if (!cur.params.empty()) out.push_back(std::move(cur));
    cur = GradBucket();
  };
  for (size_t i = ps.size(); i-- > 0;) {
    if (ps[i].grad_group != group) continue;  // (each group is contiguous: ParamRegistry)
    // Parameter i owns [offset, next offset): its floats and the alignment
    // padding after them, so that the buckets tile the buffer.
    const int64_t begin = ps[i].offset;
    const int64_t end = i + 1 < ps.size() ? ps[i + 1].offset : reg.total_floats();
    MT_CHECK(end >= begin, "parameter '", ps[i].name, "' at offset ", begin,
             " comes after the next one at ", end,
             "; fix: ParamRegistry must lay out parameters in registry order");
    const bool alone = dp_shards > 0 && ps[i].tied;  // a bucket of its own
    const int64_t part = ps[i].part_id(total_layers);
    const bool new_part = split_parts && !cur.params.empty() && part != cur_part;
    if (!cur.params.empty() && (alone || new_part || cur.end - begin > bucket_size_floats))
      close();
    cur_part = part;
    if (cur.params.empty()) cur.end = end;
    cur.begin = begin;
    cur.params.push_back(i);
    if (alone || cur.numel() >= bucket_size_floats) close();
  }
  close();
  if (dp_shards <= 0) return out;
  for (GradBucket& bk : out) {
    const int64_t unit = kShardAlign * dp_shards;
    bk.padded = (bk.numel() + unit - 1) / unit * unit;
    const int64_t piece = bk.padded / dp_shards;
    std::vector<int64_t> counts(static_cast<size_t>(dp_shards));
    for (int r = 0; r < dp_shards; ++r)
      counts[size_t(r)] = std::clamp<int64_t>(bk.numel() - r * piece, 0, piece);
    bk.shards = chunk_split(counts);
  }
  return out;
}

std::vector<FlatRange> owned_ranges(const std::vector<GradBucket>& buckets, int dp_rank) {
  std::vector<FlatRange> out;
  for (const GradBucket& bk : buckets) {
    MT_CHECK(dp_rank >= 0 && size_t(dp_rank) < bk.shards.counts.size(), "owned_ranges: DP rank ",
             dp_rank, " but the bucket at ", bk.begin, " has ", bk.shards.counts.size(),
             " pieces; fix: plan the buckets with dp_shards = the DP size");
    const FlatRange r = bk.shard(dp_rank);
    if (r.size() > 0) out.push_back(r);
  }
  std::sort(out.begin(), out.end(),
            [](const FlatRange& a, const FlatRange& b) { return a.begin < b.begin; });
  return out;
}

GradBuckets::GradBuckets(const ParamRegistry& reg, float* grads, const Communicator& dp,
                         int64_t bucket_size_floats, bool overlap, bool distributed,
                         bool reduce_in_bf16, GradGroup group, int64_t average_over)
    : buckets_(plan_grad_buckets(reg, bucket_size_floats, distributed ? dp.size() : 0, group)),
      grads_(grads),
      dp_(&dp),
      inv_(1.f / float(average_over > 0 ? average_over : dp.size())),
      overlap_(overlap),
      distributed_(distributed),
      reduce_in_bf16_(reduce_in_bf16),
      communicate_(dp.size() > 1) {
  MT_CHECK(dp.is_member(), "GradBuckets on group '", dp.name(),
           "', which this rank is not a member of; fix: pass this rank's data-parallel group");
  MT_CHECK(grads != nullptr || reg.total_floats() == 0,
           "GradBuckets got a null gradient buffer for ", reg.total_floats(),
           " floats; fix: allocate the gradients before building the buckets");
  const size_t n = reg.params().size();
  names_.reserve(n);
  for (const ParamSpec& p : reg.params()) names_.push_back(p.name);
  bucket_of_.assign(n, SIZE_MAX);  // parameters of other groups: none
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t i : buckets_[b].params) bucket_of_[i] = b;
  ready_.assign(n, 0);
  missing_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].params.size();
  handles_.resize(buckets_.size());
}

GradBuckets::~GradBuckets() = default;  // each pending CommHandle waits in its destructor

void GradBuckets::mark_ready(size_t param_index) {
  MT_CHECK(param_index < ready_.size(), "mark_ready(", param_index, ") but the registry has ",
           ready_.size(), " parameters; fix: pass an index into ParamRegistry::params()");
  MT_CHECK(!ready_[param_index], "gradient of '", names_[param_index],
           "' (parameter ", param_index,
           ") marked ready twice in one iteration; fix: call mark_ready once per parameter, in "
           "the last micro-batch's backward, and finish() before the next iteration");
  const size_t b = bucket_of_[param_index];
  MT_CHECK(b != SIZE_MAX, "gradient of '", names_[param_index], "' marked ready in the buckets "
           "of another gradient group (internal error)");
  ready_[param_index] = 1;
  --missing_[b];
  if (!overlap_) return;
  if (missing_[b] == 0 && b == next_launch_) launch_queued();
  poll();
}

void GradBuckets::launch_queued() {
  while (next_launch_ < buckets_.size() && missing_[next_launch_] == 0) {
    if (communicate_) handles_[next_launch_] = start(next_launch_);  // (times itself)
    ++next_launch_;
  }
}

void GradBuckets::poll() {
  if (!communicate_ || next_done_ == next_launch_) return;
  Timer t;
  // Testing the oldest request lets Open MPI progress all of them.
  while (next_done_ < next_launch_ && handles_[next_done_].test()) ++next_done_;
  comm_seconds_ += t.seconds();
}

uint16_t* GradBuckets::prepare(size_t b) {
  const GradBucket& bk = buckets_[b];
  reduced_bytes_ += bk.numel() * int64_t(reduce_in_bf16_ ? sizeof(uint16_t) : sizeof(float));
  if (!reduce_in_bf16_) return nullptr;
  Timer t;
  uint16_t* h = round_to_bf16_in_place(grads_ + bk.begin, bk.numel());
  convert_seconds_ += t.seconds();
  return h;
}

CommHandle GradBuckets::start(size_t b) {
  const GradBucket& bk = buckets_[b];
  TimelineSpan span(dp_->timeline(), TimelineKind::kGradSync, "grad bucket start",
                    {.bytes = bk.numel() * int64_t(reduce_in_bf16_ ? 2 : 4),
                     .group = dp_->name().c_str()});
  uint16_t* h = prepare(b);
  Timer t;
  CommHandle out =
      h != nullptr
          ? (distributed_ ? dp_->start_reduce_scatter_sum_bf16_in_place(h, bk.shards)
                          : dp_->start_all_reduce_sum_bf16(h, bk.numel()))
          : (distributed_ ? dp_->start_reduce_scatter_sum_in_place(grads_ + bk.begin, bk.shards)
                          : dp_->start_all_reduce_sum(grads_ + bk.begin, bk.numel()));
  comm_seconds_ += t.seconds();
  return out;
}

void GradBuckets::reduce(size_t b) {
  const GradBucket& bk = buckets_[b];
  TimelineSpan span(dp_->timeline(), TimelineKind::kGradSync, "grad bucket reduce",
                    {.bytes = bk.numel() * int64_t(reduce_in_bf16_ ? 2 : 4),
                     .group = dp_->name().c_str()});
  uint16_t* h = prepare(b);
  Timer t;
  if (h != nullptr) {
    if (distributed_)
      dp_->reduce_scatter_sum_bf16_in_place(h, bk.shards);
    else
      dp_->all_reduce_sum_bf16(h, bk.numel());
  } else if (distributed_) {
    dp_->reduce_scatter_sum_in_place(grads_ + bk.begin, bk.shards);
  } else {
    dp_->all_reduce_sum(grads_ + bk.begin, bk.numel());
  }
  comm_seconds_ += t.seconds();
}

void GradBuckets::average(size_t b) {
  const GradBucket& bk = buckets_[b];
  const FlatRange r = distributed_ ? bk.shard(dp_->rank()) : FlatRange{bk.begin, bk.end};
  const float inv = inv_;
  if (!reduce_in_bf16_) {
    scale_inplace(grads_ + r.begin, r.size(), inv);
    return;
  }
  // The bf16 sum of element i is at byte 2i of the bucket (the reduce-scatter
  // left this rank's piece at its own offsets): to fp32 at byte 4i, averaged.
  Timer t;
  widen_bf16_in_place(grads_ + bk.begin, r.begin - bk.begin, r.end - bk.begin, inv);
  convert_seconds_ += t.seconds();
}

void GradBuckets::finish() {
  if (communicate_ && overlap_) {
    for (size_t b = next_launch_; b < buckets_.size(); ++b) handles_[b] = start(b);  // in order
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Timer t;
      handles_[b].wait();
      comm_seconds_ += t.seconds();
      average(b);
    }
  } else if (communicate_) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      reduce(b);
      average(b);
    }
  } else if (inv_ != 1.f) {  // nothing to sum here, but an average over other replicas
    for (const GradBucket& bk : buckets_) scale_inplace(grads_ + bk.begin, bk.numel(), inv_);
  }
  // Next iteration.
  std::fill(ready_.begin(), ready_.end(), char(0));
  for (size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].params.size();
  next_launch_ = 0;
  next_done_ = 0;
}

}  // namespace mt
