#include "args/optimizer_args.h"

#include "args/args.h"
#include "core/error.h"
#include "optim/param_scheduler.h"

namespace mt {

namespace {

bool finite_nonnegative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

void validate_optimizer_args(TrainArgs& a) {
  const OptimizerArgs& o = a.optimizer_args;
  // Megatron's other choices are not built here.
  MT_CHECK(o.optimizer == "adam" || o.optimizer == "sgd", "--optimizer ", o.optimizer,
           " is not built here (Megatron-LM's muon, dist_muon, lion, soap and adaptive_muon need "
           "its emerging-optimizers package); fix: --optimizer adam or sgd");
  a.optim.kind = o.optimizer == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdam;
  MT_CHECK(std::isfinite(a.optim.sgd_momentum) && a.optim.sgd_momentum >= 0,
           "--sgd-momentum ", a.optim.sgd_momentum, " must be a finite number >= 0 (torch's SGD "
           "refuses a negative momentum; Megatron's default 0.9)");
  MT_CHECK(a.optim.kind != OptimizerKind::kSgd || a.device == "cpu", "--optimizer sgd on --device ",
           a.device, " has no GPU kernel yet; fix: --optimizer adam, or --device cpu");
  MT_CHECK(!OptimizerArgs::given(o.decoupled_lr) || finite_nonnegative(o.decoupled_lr),
           "--decoupled-lr ", o.decoupled_lr, " must be a finite number >= 0");
  MT_CHECK(!OptimizerArgs::given(o.decoupled_min_lr) || finite_nonnegative(o.decoupled_min_lr),
           "--decoupled-min-lr ", o.decoupled_min_lr, " must be a finite number >= 0");
  // arguments.py: a constant weight decay is --weight-decay, and then the
  // start/end flags must not be given; linear and cosine need both.
  const WdIncrStyle style = parse_wd_incr_style(o.weight_decay_incr_style);
  const bool start = OptimizerArgs::given(o.start_weight_decay);
  const bool end = OptimizerArgs::given(o.end_weight_decay);
  if (style == WdIncrStyle::kConstant)
    MT_CHECK(!start && !end, start ? "--start-weight-decay " : "--end-weight-decay ",
             start ? o.start_weight_decay : o.end_weight_decay, " with --weight-decay-incr-style "
             "constant (the default): Megatron-LM refuses it (a constant decay is --weight-decay); "
             "fix: add --weight-decay-incr-style linear or cosine, or use --weight-decay");
  else
    MT_CHECK(start && end, "--weight-decay-incr-style ", o.weight_decay_incr_style, " needs both "
             "--start-weight-decay and --end-weight-decay (", start ? "--end" : "--start",
             "-weight-decay is missing; Megatron-LM asserts both)");
  MT_CHECK(!(o.use_checkpoint_opt_param_scheduler && o.override_opt_param_scheduler),
           "--use-checkpoint-opt_param-scheduler and --override-opt_param-scheduler are both "
           "given (Megatron-LM asserts 'both override and use-checkpoint are set'); fix: keep "
           "one: the checkpoint's schedule values, or this command line's");
  param_scheduler_from_flags(a);  // the weight-decay ends' checks (after the batch is resolved)
}

std::string optimizer_args_note(const TrainArgs& a) {
  const OptimizerArgs& o = a.optimizer_args;
  std::string note;
  if (OptimizerArgs::given(o.decoupled_min_lr) && !OptimizerArgs::given(o.decoupled_lr))
    note = "--decoupled-min-lr without --decoupled-lr changes nothing (as in Megatron-LM: the "
           "embedding and output layer follow --lr and --min-lr)";
  if (a.optim.kind == OptimizerKind::kSgd && a.shard_optimizer())
    note += std::string(note.empty() ? "" : "; ") +
            "--optimizer sgd with the distributed optimizer / Megatron-FSDP: each rank keeps the "
            "momentum of its shard (Megatron-LM's DistributedOptimizer refuses SGD for its "
            "checkpoint format; this build's sharded checkpoints hold it)";
  return note;
}

ParamScheduler param_scheduler_from_flags(const TrainArgs& a) {
  const OptimizerArgs& o = a.optimizer_args;
  ParamScheduler s;
  s.lr = a.lr_schedule();
  if (OptimizerArgs::given(o.decoupled_lr)) {
    s.decoupled = s.lr;
    s.decoupled->max_lr = o.decoupled_lr;
    if (OptimizerArgs::given(o.decoupled_min_lr)) s.decoupled->min_lr = o.decoupled_min_lr;
  }
  s.wd.style = parse_wd_incr_style(o.weight_decay_incr_style);
  const bool constant = s.wd.style == WdIncrStyle::kConstant;
  s.wd.start_wd = constant ? a.optim.weight_decay : o.start_weight_decay;
  s.wd.end_wd = constant ? a.optim.weight_decay : o.end_weight_decay;
  // Megatron: wd_incr_steps = train_iters x global batch (or train_samples),
  // counted here in iterations of the global batch.
  s.wd.incr_iters = a.train_samples > 0 ? double(a.train_samples) / double(a.global_batch_size)
                                        : double(a.train_iters);
  s.wd.validate();
  return s;
}

}  // namespace mt
