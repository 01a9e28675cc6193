// The parameter scheduler's values in a checkpoint and on resume, as
// Megatron-LM's OptimizerParamScheduler.state_dict / load_state_dict:
// the record holds max_lr, min_lr, lr_warmup_steps, lr_decay_steps,
// lr_decay_style, start_wd, end_wd, wd_incr_steps, wd_incr_style (steps in
// samples, as Megatron counts them: iterations x global batch), plus the
// decoupled group's ends and the optimizer (adam|sgd, --sgd-momentum).
//
// Resuming with the optimizer state (Megatron loads the scheduler only then:
// not with --no-load-optim or --finetune), each value is
//   --override-opt_param-scheduler:       this command line's,
//   --use-checkpoint-opt_param-scheduler: the checkpoint's,
//   neither:                              this command line's, with a note
//                                         naming each difference and both
//                                         flags (Megatron asserts that they
//                                         agree; here a run extended by a
//                                         larger --train-iters goes on).
// The schedule's position is the checkpoint's either way (its iterations
// that updated; with --override-opt_param-scheduler Megatron resets it to the
// consumed samples, so fp16's skipped iterations count again). The WSD
// flags are not in Megatron's record: always this command line's.
// Megatron keeps the decoupled group's ends in its optimizer state, which
// silently wins without --override; here they follow the rule above like
// --lr (a changed --decoupled-lr is never ignored in silence).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "args/args.h"
#include "checkpoint/checkpoint_io.h"
#include "optim/param_scheduler.h"

namespace mt {

// The record saved in every checkpoint's arguments ("opt_param_scheduler").
nlohmann::json scheduler_record(const TrainArgs& a, const ParamScheduler& s);

// The scheduler this run uses. `saved_args`: the loaded checkpoint's
// arguments when its optimizer state is loaded, else null (the flags' values).
// May reset state.skipped_iterations (override, see above). Appends what it
// took from where to `note` (empty when nothing differs).
ParamScheduler resume_param_scheduler(const TrainArgs& a, const nlohmann::json* saved_args,
                                      RunState& state, std::string& note);

}  // namespace mt
