// Megatron-LM's optimizer-choice and parameter-scheduler flags beyond the
// learning-rate schedule (arguments.py, training_config.py's
// SchedulerConfig, core/optimizer/__init__.py, optimizer_param_scheduler.py):
//   --optimizer adam|sgd (--sgd-momentum in OptimizerConfig),
//   --decoupled-lr / --decoupled-min-lr: the input embedding's and the output
//     layer's own learning-rate ends (optim/param_scheduler.h),
//   --start-weight-decay / --end-weight-decay / --weight-decay-incr-style
//     (optim/wd_schedule.h),
//   --use-checkpoint-opt_param-scheduler / --override-opt_param-scheduler:
//     whose schedule values a resumed run uses (train/scheduler_resume.h).
#pragma once
#include <cmath>
#include <limits>
#include <string>

namespace mt {

struct TrainArgs;
struct ParamScheduler;

struct OptimizerArgs {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  std::string optimizer = "adam";   // --optimizer
  double decoupled_lr = kUnset;     // --decoupled-lr (NaN: not given, Megatron's None)
  double decoupled_min_lr = kUnset; // --decoupled-min-lr (NaN: --min-lr)
  double start_weight_decay = kUnset, end_weight_decay = kUnset;  // NaN: --weight-decay
  std::string weight_decay_incr_style = "constant";
  bool use_checkpoint_opt_param_scheduler = false;
  bool override_opt_param_scheduler = false;

  static bool given(double v) { return !std::isnan(v); }
};

// Megatron's checks of these flags, by name with the fix; sets
// a.optim.kind. Part of TrainArgs::validate.
void validate_optimizer_args(TrainArgs& a);

// The start-up notes these flags call for ("" for none).
std::string optimizer_args_note(const TrainArgs& a);

// The scheduler the flags give (before any checkpoint's values).
ParamScheduler param_scheduler_from_flags(const TrainArgs& a);

}  // namespace mt
