#include "optim/staged_grads.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/fill.h"
#include "kernels/reduce.h"

namespace mt {

namespace {

int64_t round_up(int64_t n) { return (n + kShardAlign - 1) / kShardAlign * kShardAlign; }

}  // namespace

GradPlacement plan_staged_grads(const ParamRegistry& reg) {
  const std::vector<ParamSpec>& ps = reg.params();
  const int64_t total_layers = reg.config().num_layers;
  MT_CHECK(reg.group_begin(GradGroup::kExpertDataParallel) == reg.total_floats(),
           "sharded gradients (--data-parallel-sharding-strategy optim_grads) with MoE experts "
           "are not implemented yet; fix: --data-parallel-sharding-strategy optim");
  // Each part's flat range: parameter i owns [offset_i, next offset), so
  // that a part's range holds its alignment gaps (parts are contiguous in
  // registry order).
  struct Range {
    int64_t begin = -1, end = -1;
  };
  std::vector<Range> part(size_t(total_layers + 2));  // index part + 1
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t end = i + 1 < ps.size() ? ps[i + 1].offset : reg.total_floats();
    Range& r = part[size_t(ps[i].part_id(total_layers) + 1)];
    MT_CHECK(r.end < 0 || r.end == ps[i].offset, "parameter '", ps[i].name,
             "' is not next to the others of its part (internal error: the registry lays out "
             "each part's parameters together)");
    if (r.begin < 0) r.begin = ps[i].offset;
    r.end = end;
  }
  auto size = [&](int64_t p) {
    const Range& r = part[size_t(p + 1)];
    return r.begin < 0 ? 0 : round_up(r.end - r.begin);
  };
  // The pool: [embeddings][loss head][one region for every decoder layer].
  const int64_t head = size(-1), layers = head + size(total_layers);
  int64_t largest_layer = 0;
  for (int64_t l = 0; l < total_layers; ++l) largest_layer = std::max(largest_layer, size(l));
  GradPlacement g;
  g.floats = layers + largest_layer;
  g.offset.resize(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t p = ps[i].part_id(total_layers);
    const int64_t base = p < 0 ? 0 : p == total_layers ? head : layers;
    g.offset[i] = base + (ps[i].offset - part[size_t(p + 1)].begin);
  }
  return g;
}

StagedGrads::StagedGrads(ModelRuntime& rt, const Communicator& dp, int64_t bucket_size_floats)
    : dp_(&dp),
      buckets_(plan_grad_buckets(rt.reg, bucket_size_floats, dp.size(), GradGroup::kDataParallel,
                                 /*split_parts=*/true)),
      inv_(1.f / float(dp.size())) {
  const ParamRegistry& reg = rt.reg;
  MT_CHECK(rt.grads_staged(),
           "StagedGrads over a model whose gradients are not in a staging "
           "pool (internal error: build the ModelRuntime with plan_staged_grads)");
  const int64_t total_layers = reg.config().num_layers;
  bucket_of_.assign(reg.params().size(), SIZE_MAX);
  of_part_.resize(size_t(total_layers + 2));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const GradBucket& bk = buckets_[b];
    // bk.begin is its lowest parameter's offset (the last one added).
    float* start = rt.grad_of(bk.params.back());
    for (size_t i : bk.params) {
      bucket_of_[i] = b;
      MT_CHECK(rt.grad_of(i) == start + (reg.params()[i].offset - bk.begin), "gradient of '",
               reg.params()[i].name,
               "' is not where its bucket's range in "
               "the staging pool puts it (internal error)");
    }
    pool_.push_back(start);
    of_part_[size_t(reg.params()[bk.params.back()].part_id(total_layers) + 1)].push_back(b);
  }
  // This rank's pieces, in flat order: each one the next range of the shard.
  std::vector<std::pair<int64_t, size_t>> pieces;  // (flat begin, bucket)
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].shard(dp.rank()).size() > 0)
      pieces.push_back({buckets_[b].shard(dp.rank()).begin, b});
  std::sort(pieces.begin(), pieces.end());
  shard_offset_.assign(buckets_.size(), -1);
  for (const auto& [begin, b] : pieces) {
    shard_offset_[b] = shard_floats_;
    shard_floats_ += buckets_[b].shard(dp.rank()).size();
  }
  shard_buf_ = DeviceBuffer(Device::kCpu, size_t(shard_floats_) * sizeof(float));
  shard_ = reinterpret_cast<float*>(shard_buf_.data());
  zero();  // touched once, here
}

std::vector<FlatRange> StagedGrads::owned_ranges() const {
  return mt::owned_ranges(buckets_, dp_->rank());
}

void StagedGrads::reduce_part(int64_t part) {
  MT_CHECK(part >= -1 && size_t(part + 1) < of_part_.size(), "reduce_part(", part,
           ") outside the model's parts -1 .. ", of_part_.size() - 2);
  const int r = dp_->rank();
  for (size_t b : of_part_[size_t(part + 1)]) {
    const GradBucket& bk = buckets_[b];
    float* x = pool_[b];
    if (dp_->size() > 1) dp_->reduce_scatter_sum_in_place(x, bk.shards);
    reduced_bytes_ += bk.numel() * int64_t(sizeof(float));
    if (shard_offset_[b] >= 0)
      add_scaled_inplace(shard_ + shard_offset_[b], x + bk.shards.displs[size_t(r)],
                         bk.shards.counts[size_t(r)], inv_);
    zero_streaming(x, bk.numel());
  }
}

void StagedGrads::zero() { zero_streaming(shard_, shard_floats_); }

}  // namespace mt
