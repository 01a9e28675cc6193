#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/reduce.h"
#include "kernels/sgd.h"

namespace mt {

AdamWOptimizer::AdamWOptimizer(const ParamRegistry& reg, const OptimizerConfig& cfg,
                               std::vector<FlatRange> ranges, const Communicator* dp,
                               bool main_weights, Device device, const Communicator* edp,
                               bool packed_grads, bool packed_params)
    : reg_(reg), cfg_(cfg), sharded_(!ranges.empty()), packed_grads_(packed_grads),
      packed_params_(packed_params), dp_(dp),
      edp_(edp),
      main_weights_(main_weights) {
  MT_CHECK(!sharded_ || (dp != nullptr && dp->is_member()),
           "a sharded AdamWOptimizer (", ranges.size(),
           " ranges) needs its data-parallel group; fix: pass this rank's dp communicator");
  if (!sharded_) ranges = {FlatRange{0, reg.total_floats()}};
  // Segments: parameter ∩ range, in range order then parameter order.
  const std::vector<ParamSpec>& ps = reg.params();
  int64_t state = 0, prev_end = 0;
  for (const FlatRange& r : ranges) {
    MT_CHECK(r.begin >= prev_end && r.end >= r.begin && r.end <= reg.total_floats(),
             "optimizer range [", r.begin, ", ", r.end, ") is not sorted, disjoint and inside [0, ",
             reg.total_floats(), "); fix: pass owned_ranges() of the distributed bucket layout");
    prev_end = r.end;
    for (size_t i = 0; i < ps.size(); ++i) {
      const int64_t b = std::max(r.begin, ps[i].offset);
      const int64_t e = std::min(r.end, ps[i].offset + ps[i].numel());
      if (b < e) segments_.push_back({i, b, e, state + (b - r.begin)});
    }
    state += r.size();
  }
  state_floats_ = state;
  buffer_ = DeviceBuffer(device, state_bytes());
  m_ = reinterpret_cast<float*>(buffer_.data());
  v_ = m_ + state_floats_;
  if (main_weights_) main_ = v_ + state_floats_;
}

double AdamWOptimizer::grad_norm(const float* grads, Communicator* mp,
                                 const Communicator* emp) const {
  return std::sqrt(global_sum(grads, packed_grads_, sum_squares, mp, emp));
}

double AdamWOptimizer::global_sum(const float* data, bool packed, SegmentSum f, Communicator* mp,
                                  const Communicator* emp) const {
  double sq = group_sum(data, packed, f, GradGroup::kDataParallel);
  if (sharded_) dp_->all_reduce_sum(&sq, 1);
  if (mp != nullptr) mp->all_reduce_sum(&sq, 1);
  if (reg_.group_begin(GradGroup::kExpertDataParallel) < reg_.total_floats()) {
    // Experts: each once over EP x PP (they are whole on their rank, also
    // under TP), their shards over expert DP.
    double ex = group_sum(data, packed, f, GradGroup::kExpertDataParallel);
    if (sharded_ && edp_ != nullptr) edp_->all_reduce_sum(&ex, 1);
    if (emp != nullptr) emp->all_reduce_sum(&ex, 1);
    sq += ex;
  }
  return sq;
}

double AdamWOptimizer::group_sum_squares(const float* grads, GradGroup group) const {
  return group_sum(grads, packed_grads_, sum_squares, group);
}

double AdamWOptimizer::group_sum(const float* data, bool packed, SegmentSum f,
                                 GradGroup group) const {
  const StageLayout& st = reg_.stage();
  // The counted segments' ranges, summed in one call (one parallel region on
  // the host). On the GPU each sum is a wait for the device: there adjacent
  // ranges are merged into one (one wait per step with one rank); on the host
  // they stay apart, so the sum's bits do not depend on how segments abut.
  const bool merge = on_device(data);
  std::vector<FloatRange> ranges;
  for (const OptimSegment& s : segments_) {
    const ParamSpec& p = reg_.params()[s.param];
    if (p.grad_group != group) continue;
    if (p.grad_group == GradGroup::kDataParallel && p.tp_replicated() && st.tp_rank != 0) continue;
    if (p.tied && !st.has_embedding) continue;  // the first stage's copy counts
    const float* at = data + (packed ? s.state : s.begin);
    if (merge && !ranges.empty() && ranges.back().x + ranges.back().n == at)
      ranges.back().n += s.size();
    else
      ranges.push_back({at, s.size()});
  }
  return ranges.empty() ? 0.0 : f(ranges.data(), ranges.size());
}

float AdamWOptimizer::clip_coefficient(double norm) const {
  if (cfg_.clip_grad <= 0) return 1.f;
  const double coeff = double(cfg_.clip_grad) / (norm + 1e-6);
  return coeff >= 1.0 ? 1.f : float(coeff);
}

void AdamWOptimizer::step(float* params, const float* grads, const StepRates& rates,
                          uint16_t* params_bf16, float grad_scale) {
  MT_CHECK(main_ ? params == nullptr && (params_bf16 != nullptr || packed_params_)
              : params != nullptr,
           "AdamWOptimizer::step: ", main_ ? "with main weights pass the model's bf16 weights "
                                            "(and no fp32 ones)"
                                          : "pass the model's fp32 weights",
           " (internal error)");
  ++steps_;
  const double wd = std::isnan(rates.weight_decay) ? cfg_.weight_decay : rates.weight_decay;
  std::vector<AdamWSegment> adamw;  // every segment's update, in one pass
  adamw.reserve(segments_.size());
  for (const OptimSegment& s : segments_) {
    const ParamSpec& p = reg_.params()[s.param];
    const float lr = float(p.embedding_or_output ? rates.decoupled_lr : rates.lr);
    const float decay = p.weight_decay ? float(wd) : 0.f;
    float* w = main_ ? main_ + s.state : params + s.begin;
    uint16_t* w16 = params_bf16 ? params_bf16 + (packed_params_ ? s.state : s.begin) : nullptr;
    if (cfg_.kind == OptimizerKind::kSgd) {
      sgd_step(w, grads + grad_offset(s), m_ + s.state, s.size(),
               SgdHyper{lr, cfg_.sgd_momentum, decay, grad_scale}, w16);
      continue;
    }
    AdamWHyper h;
    h.lr = lr;
    h.beta1 = cfg_.beta1;
    h.beta2 = cfg_.beta2;
    h.eps = cfg_.eps;
    h.grad_scale = grad_scale;
    h.weight_decay = decay;
    adamw.push_back({w, grads + grad_offset(s), m_ + s.state, v_ + s.state, s.size(), h, w16});
  }
  adamw_step(adamw.data(), adamw.size(), steps_);
}

void AdamWOptimizer::set_param_state(size_t param, const float* m, const float* v) {
  MT_CHECK(param < reg_.params().size(), "set_param_state(", param, ") but the registry has ",
           reg_.params().size(), " parameters");
  const int64_t offset = reg_.params()[param].offset;
  for (const OptimSegment& s : segments_) {
    if (s.param != param) continue;
    copy_bytes(m_ + s.state, m + (s.begin - offset), size_t(s.size()) * sizeof(float));
    copy_bytes(v_ + s.state, v + (s.begin - offset), size_t(s.size()) * sizeof(float));
  }
}

void AdamWOptimizer::set_main_params(size_t param, const float* values) {
  MT_CHECK(param < reg_.params().size(), "set_main_params(", param, ") but the registry has ",
           reg_.params().size(), " parameters");
  if (main_ == nullptr) return;
  const int64_t offset = reg_.params()[param].offset;
  for (const OptimSegment& s : segments_)
    if (s.param == param)
      copy_bytes(main_ + s.state, values + (s.begin - offset), size_t(s.size()) * sizeof(float));
}

}  // namespace mt
