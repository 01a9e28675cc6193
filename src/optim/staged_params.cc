#include "optim/staged_params.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "kernels/precision.h"

namespace mt {

StagedParams::StagedParams(ModelRuntime& rt, const StagedGrads& grads)
    : rt_(rt), grads_(grads), holds_(4, kNone), in_flight_(4) {
  MT_CHECK(rt.weights_staged(),
           "StagedParams over a model whose weights are not in a staging "
           "pool (internal error: build the ModelRuntime with GradPlacement::weights)");
  if (rt.params_bf16 != nullptr) {
    shard_buf_ = DeviceBuffer(Device::kCpu, size_t(grads.shard_floats()) * sizeof(uint16_t));
    shard_bf16_ = reinterpret_cast<uint16_t*>(shard_buf_.data());
  }
}

void StagedParams::attach(const AdamWOptimizer& opt) {
  MT_CHECK(opt.has_main_params() && opt.state_floats() == grads_.shard_floats(),
           "optim_grads_params needs the optimizer's main weights over the gradient shard's "
           "pieces (internal error)");
  main_ = opt.main_params();
}

void StagedParams::refresh() {
  MT_CHECK(main_ != nullptr, "StagedParams::refresh before attach (internal error)");
  if (shard_bf16_ != nullptr) f32_to_bf16(shard_bf16_, main_, grads_.shard_floats());
  invalidate();
}

size_t StagedParams::region_of(int64_t part) const {
  return part < 0 ? 0 : part == grads_.num_parts() - 2 ? 1 : 2 + size_t(part % 2);
}

bool StagedParams::is_layer_here(int64_t part) const {
  return part >= 0 && part < grads_.num_parts() - 2 &&
         !grads_.part_buckets(GradGroup::kDataParallel, part).empty();
}

void StagedParams::invalidate() {
  for (std::vector<CommHandle>& hs : in_flight_) {
    for (CommHandle& h : hs) h.wait();
    hs.clear();
  }
  std::fill(holds_.begin(), holds_.end(), kNone);
  last_layer_ = kNone;
}

void StagedParams::copy_piece(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const {
  const GradBucket& bk = grads_.buckets(g)[b];
  const int r = grads_.comm(g)->rank();
  const int64_t at = grads_.shard_offset(g, b), begin = bk.shards.displs[size_t(r)];
  const int64_t count = bk.shards.counts[size_t(r)];
  if (at < 0) return;  // no piece of this bucket here
  if (dst16 != nullptr)
    std::copy(shard_bf16_ + at, shard_bf16_ + at + count, dst16 + begin);
  else
    std::copy(main_ + at, main_ + at + count, dst32 + begin);
}

void StagedParams::gather_bucket(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const {
  copy_piece(g, b, dst32, dst16);
  const Communicator& comm = *grads_.comm(g);
  if (comm.size() == 1) return;
  const ChunkSplit& shards = grads_.buckets(g)[b].shards;
  if (dst16 != nullptr)
    comm.all_gather_in_place(dst16, shards);
  else
    comm.all_gather_in_place(dst32, shards);
}

CommHandle StagedParams::start_bucket(GradGroup g, size_t b, float* dst32, uint16_t* dst16) const {
  copy_piece(g, b, dst32, dst16);
  const ChunkSplit& shards = grads_.buckets(g)[b].shards;
  return dst16 != nullptr ? grads_.comm(g)->start_all_gather_in_place(dst16, shards)
                          : grads_.comm(g)->start_all_gather_in_place(dst32, shards);
}

void StagedParams::gather_part(int64_t part, bool start) {
  std::vector<CommHandle>& hs = in_flight_[region_of(part)];
  for (GradGroup g : {GradGroup::kDataParallel, GradGroup::kExpertDataParallel}) {
    if (grads_.comm(g) == nullptr) continue;
    for (size_t b : grads_.part_buckets(g, part)) {
      // The bucket's range in the pool starts at its lowest parameter.
      const int64_t at = rt_.param_offset(grads_.buckets(g)[b].params.back());
      float* d32 = rt_.params ? rt_.params + at : nullptr;
      uint16_t* d16 = rt_.params_bf16 ? rt_.params_bf16 + at : nullptr;
      if (start && grads_.comm(g)->size() > 1)
        hs.push_back(start_bucket(g, b, d32, d16));
      else
        gather_bucket(g, b, d32, d16);
    }
  }
  holds_[region_of(part)] = part;
}

void StagedParams::need(int64_t part) {
  MT_CHECK(main_ != nullptr, "StagedParams::need before attach (internal error)");
  MT_CHECK(part >= -1 && part < grads_.num_parts() - 1, "params_needed(", part,
           ") outside the model's parts -1 .. ", grads_.num_parts() - 2);
  const size_t region = region_of(part);
  Timer blocked;
  if (holds_[region] == part) {  // gathered, or being gathered by a prefetch
    if (!in_flight_[region].empty()) ++prefetched_, ++gathers_;
    for (CommHandle& h : in_flight_[region]) h.wait();
  } else {  // (a prefetch of another part may still be writing the region)
    ++gathers_;
    for (CommHandle& h : in_flight_[region]) h.wait();
    in_flight_[region].clear();
    gather_part(part, /*start=*/false);
  }
  in_flight_[region].clear();
  exposed_seconds_ += blocked.seconds();
  if (!is_layer_here(part)) return;
  // The next layer into the other region: going down after a step down or a
  // repeat (backward, which starts with the layer forward or the recompute
  // ended on), else up.
  const int64_t step = last_layer_ == part + 1 || last_layer_ == part ? -1 : 1;
  last_layer_ = part;
  const int64_t next = part + step;
  const size_t other = region_of(next);
  if (!is_layer_here(next) || holds_[other] == next) return;
  for (CommHandle& h : in_flight_[other]) h.wait();  // a gather the guess no longer wants
  in_flight_[other].clear();
  gather_part(next, /*start=*/true);
}

ReadView StagedParams::gather_all(HostBuffer& full) {
  MT_CHECK(main_ != nullptr, "StagedParams::gather_all before attach (internal error)");
  invalidate();  // no gather in flight on the groups before these
  const int64_t n = rt_.reg.total_floats();
  full = HostBuffer(size_t(n) * (shard_bf16_ ? sizeof(uint16_t) : sizeof(float)));
  float* f32 = shard_bf16_ ? nullptr : reinterpret_cast<float*>(full.data());
  uint16_t* b16 = shard_bf16_ ? reinterpret_cast<uint16_t*>(full.data()) : nullptr;
  for (GradGroup g : {GradGroup::kDataParallel, GradGroup::kExpertDataParallel}) {
    if (grads_.comm(g) == nullptr) continue;
    for (size_t b = 0; b < grads_.buckets(g).size(); ++b) {
      const int64_t begin = grads_.buckets(g)[b].begin;  // registry offsets
      gather_bucket(g, b, f32 ? f32 + begin : nullptr, b16 ? b16 + begin : nullptr);
    }
  }
  return b16 ? ReadView(b16) : ReadView(f32);
}

}  // namespace mt
