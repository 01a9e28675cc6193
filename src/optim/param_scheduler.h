// Megatron-LM's OptimizerParamScheduler: what each optimizer step uses —
// the learning rate of the default parameter group (lr_schedule.h), that of
// the input embedding and output layer (--decoupled-lr / --decoupled-min-lr:
// the same schedule between those ends; Megatron's param group keyed on
// is_embedding_or_output_parameter, ParamSpec::embedding_or_output here),
// and the weight decay (wd_schedule.h).
#pragma once
#include <limits>
#include <optional>

#include "optim/lr_schedule.h"
#include "optim/wd_schedule.h"

namespace mt {

// One step's rates. From a bare learning rate: every parameter at that rate,
// and the optimizer's configured --weight-decay (weight_decay NaN).
struct StepRates {
  double lr = 0, decoupled_lr = 0;
  double weight_decay = std::numeric_limits<double>::quiet_NaN();
  StepRates() = default;
  StepRates(double lr_all) : lr(lr_all), decoupled_lr(lr_all) {}  // NOLINT: implicit on purpose
};

struct ParamScheduler {
  LrSchedule lr;
  std::optional<LrSchedule> decoupled;  // --decoupled-lr given
  WdSchedule wd;

  // The rates after `steps` completed (updating) iterations.
  StepRates at(double steps) const {
    StepRates r(lr.lr_at(steps));
    if (decoupled) r.decoupled_lr = decoupled->lr_at(steps);
    r.weight_decay = wd.wd_at(steps);
    return r;
  }
};

}  // namespace mt
