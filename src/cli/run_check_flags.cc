#include "cli/run_check_flags.h"

namespace mt {

void add_run_check_flags(CLI::App& app, RunCheckArgs* c) {
  CLI::Option_group* g = app.add_option_group("checkpoint mechanics, checks and logs");
  g->add_flag("--async-save", c->async_save,
              "write each checkpoint's files on a background thread while training goes on "
              "(from a copy of the weights and optimizer state); the next save and the exit "
              "wait for it; it becomes visible only once complete, as a synchronous save");
  g->add_flag("--no-save-optim", c->no_save_optim,
              "save checkpoints without optimizer state (resuming from one needs --no-load-optim "
              "or --finetune)");
  g->add_flag("--exit-on-missing-checkpoint", c->exit_on_missing_checkpoint,
              "with --load: end with an error when it holds no checkpoint, instead of starting "
              "from scratch");
  g->add_flag("--log-params-norm", c->log_params_norm,
              "log the L2 norm of all parameters (params norm; params_norm in --log-json, "
              "params-norm in TensorBoard)");
  g->add_flag("--log-num-zeros-in-grad", c->log_num_zeros_in_grad,
              "log the number of zero gradient elements (num zeros; num_zeros, num-zeros)");
  g->add_flag("--log-progress", c->log_progress,
              "append Megatron's progress lines (job start, each checkpoint with throughput, "
              "floating-point operations and tokens) to progress.txt in --save");
  g->add_option("--timing-log-level", c->timing_log_level,
                "0: iteration time only; 1: also the forward-backward, all-grads-sync and "
                "optimizer times across ranks at each log line; 2: as 1 here");
  g->add_option("--timing-log-option", c->timing_log_option,
                "timers across ranks: max, minmax (default) or all");
  g->add_flag("--log-straggler", c->log_straggler,
              "at each log line: the slowest and fastest rank's step time and their spread");
  g->add_flag("!--no-check-for-nan-in-loss-and-grad", c->check_for_nan_in_loss_and_grad,
              "do not stop on a NaN/Inf loss or gradient norm (Megatron's default checks)");
  g->add_flag("--check-for-spiky-loss", c->check_for_spiky_loss,
              "warn when an iteration's loss is >= 10x the largest of the first 100 (Megatron's "
              "rule)");
  g->add_option("--rerun-mode", c->rerun_mode,
                "disabled (default here), validate_results (re-run an iteration whose loss is "
                "NaN, Inf or spiky; reproduced: stop with exit code 17) or report_stats (re-run "
                "every iteration, log the differences)");
  g->add_flag("--deterministic-mode", c->deterministic_mode,
              "accepted: CPU runs are already bit-reproducible");
}

}  // namespace mt
