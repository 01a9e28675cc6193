#include "optim/staged_grads.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/bf16_in_place.h"
#include "kernels/fill.h"
#include "kernels/reduce.h"

namespace mt {

namespace {

int64_t round_up(int64_t n) { return (n + kShardAlign - 1) / kShardAlign * kShardAlign; }

}  // namespace

GradPlacement plan_staged_grads(const ParamRegistry& reg) {
  const std::vector<ParamSpec>& ps = reg.params();
  const int64_t total_layers = reg.config().num_layers;
  // Each (part, group)'s flat range: parameter i owns [offset_i, next
  // offset), so that a range holds its alignment gaps (the registry lays out
  // a part's parameters of one group together; MoE experts after the dense ones).
  struct Range {
    int64_t begin = -1, end = -1;
    int64_t size() const { return begin < 0 ? 0 : round_up(end - begin); }
  };
  const size_t parts = size_t(total_layers + 2);  // index part + 1
  std::vector<Range> dense(parts), expert(parts);
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t end = i + 1 < ps.size() ? ps[i + 1].offset : reg.total_floats();
    const size_t k = size_t(ps[i].part_id(total_layers) + 1);
    Range& r = ps[i].grad_group == GradGroup::kDataParallel ? dense[k] : expert[k];
    MT_CHECK(r.end < 0 || r.end == ps[i].offset, "parameter '", ps[i].name,
             "' is not next to the others of its part (internal error: the registry lays out "
             "each part's parameters of a gradient group together)");
    if (r.begin < 0) r.begin = ps[i].offset;
    r.end = end;
  }
  auto size = [&](size_t k) { return dense[k].size() + expert[k].size(); };
  // The pool: [embeddings][loss head][one region for every decoder layer],
  // each region its dense gradients, then its experts'.
  const size_t emb = 0, head = parts - 1;
  const int64_t head_base = size(emb), layers_base = head_base + size(head);
  int64_t largest_layer = 0;
  for (size_t k = 1; k + 1 < parts; ++k) largest_layer = std::max(largest_layer, size(k));
  GradPlacement g;
  g.floats = layers_base + largest_layer;
  g.offset.resize(ps.size());
  // The weights' pool (optim_grads_params): the same, with odd layers in a
  // second layer region.
  g.weight_floats = g.floats + largest_layer;
  g.weight_offset.resize(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    const size_t k = size_t(ps[i].part_id(total_layers) + 1);
    const int64_t base = k == emb ? 0 : k == head ? head_base : layers_base;
    g.offset[i] = ps[i].grad_group == GradGroup::kDataParallel
                      ? base + (ps[i].offset - dense[k].begin)
                      : base + dense[k].size() + (ps[i].offset - expert[k].begin);
    const bool odd_layer = k != emb && k != head && (k - 1) % 2 == 1;
    g.weight_offset[i] = g.offset[i] + (odd_layer ? largest_layer : 0);
  }
  return g;
}

StagedGrads::StagedGrads(ModelRuntime& rt, const Communicator& dp, int64_t bucket_size_floats,
                         const Communicator* edp, bool reduce_in_bf16)
    : inv_(1.f / float(dp.size())), reduce_in_bf16_(reduce_in_bf16) {
  MT_CHECK(rt.grads_staged(),
           "StagedGrads over a model whose gradients are not in a staging "
           "pool (internal error: build the ModelRuntime with plan_staged_grads)");
  const bool has_experts =
      rt.reg.group_begin(GradGroup::kExpertDataParallel) < rt.reg.total_floats();
  MT_CHECK(!has_experts || edp != nullptr,
           "StagedGrads of a model with MoE experts needs their "
           "expert-data-parallel group (internal error)");
  bucket_of_.assign(rt.reg.params().size(), SIZE_MAX);
  dense_.comm = &dp;
  plan_group(dense_, rt, GradGroup::kDataParallel, bucket_size_floats);
  if (has_experts) {
    experts_.comm = edp;
    plan_group(experts_, rt, GradGroup::kExpertDataParallel, bucket_size_floats);
  }
  shard_buf_ = DeviceBuffer(Device::kCpu, size_t(shard_floats_) * sizeof(float));
  shard_ = reinterpret_cast<float*>(shard_buf_.data());
  zero();  // touched once, here
}

void StagedGrads::plan_group(Group& g, ModelRuntime& rt, GradGroup id, int64_t bucket_size_floats) {
  const ParamRegistry& reg = rt.reg;
  const int64_t total_layers = reg.config().num_layers;
  const int rank = g.comm->rank();
  g.buckets = plan_grad_buckets(reg, bucket_size_floats, g.comm->size(), id, /*split_parts=*/true);
  g.of_part.resize(size_t(total_layers + 2));
  for (size_t b = 0; b < g.buckets.size(); ++b) {
    const GradBucket& bk = g.buckets[b];
    // bk.begin is its lowest parameter's offset (the last one added).
    float* start = rt.grad_of(bk.params.back());
    for (size_t i : bk.params) {
      bucket_of_[i] = b;
      MT_CHECK(rt.grad_of(i) == start + (reg.params()[i].offset - bk.begin), "gradient of '",
               reg.params()[i].name,
               "' is not where its bucket's range in "
               "the staging pool puts it (internal error)");
    }
    g.pool.push_back(start);
    g.of_part[size_t(reg.params()[bk.params.back()].part_id(total_layers) + 1)].push_back(b);
  }
  // This rank's pieces, in flat order, after those of the groups before.
  std::vector<std::pair<int64_t, size_t>> pieces;  // (flat begin, bucket)
  for (size_t b = 0; b < g.buckets.size(); ++b)
    if (g.buckets[b].shard(rank).size() > 0) pieces.push_back({g.buckets[b].shard(rank).begin, b});
  std::sort(pieces.begin(), pieces.end());
  g.shard_offset.assign(g.buckets.size(), -1);
  for (const auto& [begin, b] : pieces) {
    g.shard_offset[b] = shard_floats_;
    shard_floats_ += g.buckets[b].shard(rank).size();
  }
}

std::vector<FlatRange> StagedGrads::owned_ranges() const {
  std::vector<FlatRange> r = mt::owned_ranges(dense_.buckets, dense_.comm->rank());
  if (experts_.comm != nullptr) {
    const std::vector<FlatRange> e = mt::owned_ranges(experts_.buckets, experts_.comm->rank());
    r.insert(r.end(), e.begin(), e.end());
  }
  return r;
}

void StagedGrads::reduce_part(int64_t part) {
  MT_CHECK(part >= -1 && size_t(part + 1) < dense_.of_part.size(), "reduce_part(", part,
           ") outside the model's parts -1 .. ", dense_.of_part.size() - 2);
  reduce(dense_, part);
  if (experts_.comm != nullptr) reduce(experts_, part);
}

void StagedGrads::reduce(Group& g, int64_t part) {
  const int r = g.comm->rank();
  for (size_t b : g.of_part[size_t(part + 1)]) {
    const GradBucket& bk = g.buckets[b];
    float* x = g.pool[b];
    const int64_t begin = bk.shards.displs[size_t(r)], count = bk.shards.counts[size_t(r)];
    float scale = inv_;
    if (reduce_in_bf16_) {
      // bf16 element i at byte 2i of the bucket; this rank's piece widened
      // back to fp32 at its own offsets, times 1/N.
      uint16_t* h = round_to_bf16_in_place(x, bk.numel());
      if (g.comm->size() > 1) g.comm->reduce_scatter_sum_bf16_in_place(h, bk.shards);
      widen_bf16_in_place(x, begin, begin + count, inv_);
      scale = 1.f;
    } else if (g.comm->size() > 1) {
      g.comm->reduce_scatter_sum_in_place(x, bk.shards);
    }
    reduced_bytes_ += bk.numel() * int64_t(reduce_in_bf16_ ? sizeof(uint16_t) : sizeof(float));
    if (g.shard_offset[b] >= 0)
      add_scaled_inplace(shard_ + g.shard_offset[b], x + begin, count, scale);
    zero_streaming(x, bk.numel());
  }
}

void StagedGrads::zero() { zero_streaming(shard_, shard_floats_); }

}  // namespace mt
