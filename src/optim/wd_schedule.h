// Weight-decay schedule as Megatron-LM's OptimizerParamScheduler.get_wd:
// from --start-weight-decay to --end-weight-decay over the run's iterations
// (Megatron: wd_incr_steps = --train-iters x global batch, or
// --train-samples), constant / linear / cosine; --end-weight-decay after.
// Iteration k (1-based) trains with wd_at(k - 1), as lr_at (lr_schedule.h).
// With --weight-decay-incr-style constant (the default) both ends are
// --weight-decay. The decay is applied to the parameters that decay at all
// (not biases or 1-D ones: Megatron's wd_mult 0).
#pragma once
#include <string>

namespace mt {

enum class WdIncrStyle { kConstant, kLinear, kCosine };

WdIncrStyle parse_wd_incr_style(const std::string& s);
const char* wd_incr_style_name(WdIncrStyle s);

struct WdSchedule {
  double start_wd = 0.01, end_wd = 0.01;
  double incr_iters = 0;  // the run's iterations (fractional from --train-samples)
  WdIncrStyle style = WdIncrStyle::kConstant;

  // Weight decay after `steps` completed iterations.
  double wd_at(double steps) const;
  // Megatron's asserts: 0 <= start <= end, equal when constant.
  void validate() const;
};

}  // namespace mt
