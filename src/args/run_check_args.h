// Megatron-LM's checkpoint-mechanics, check and logging flags that this build
// gives a meaning (arguments.py; training_config.py, resilience_config.py):
// what each does here is said beside it and built in train/ (async_save in
// checkpoint/async_save.h; the norms in observe/step_stats.h; progress.txt in
// observe/progress_log.h; the per-rank timers in observe/rank_timers.h; --rerun-mode
// in train/rerun_check.h).
#pragma once
#include <string>

namespace mt {

struct RunCheckArgs {
  // Checkpoints.
  bool async_save = false;       // --async-save: the files are written in the background
  bool no_save_optim = false;    // --no-save-optim: checkpoints without optimizer state
  bool exit_on_missing_checkpoint = false;  // --exit-on-missing-checkpoint: --load must hold one
  // Logs.
  bool log_params_norm = false;        // --log-params-norm: "params norm", params_norm, params-norm
  bool log_num_zeros_in_grad = false;  // --log-num-zeros-in-grad: "num zeros", num_zeros, num-zeros
  bool log_progress = false;           // --log-progress: <save>/progress.txt, Megatron's lines
  int timing_log_level = 0;            // --timing-log-level 0|1|2
  std::string timing_log_option = "minmax";  // --timing-log-option max|minmax|all
  bool log_straggler = false;          // --log-straggler: slowest rank and spread of step times
  // Checks.
  bool check_for_nan_in_loss_and_grad = true;  // --no-check-for-nan-in-loss-and-grad clears it
  bool check_for_spiky_loss = false;           // --check-for-spiky-loss
  std::string rerun_mode = "disabled";         // --rerun-mode (train/rerun_check.h)
  bool deterministic_mode = false;             // --deterministic-mode (CPU runs already are)
};

// Refuses values Megatron refuses and the ones not built, by name, with the
// reason and the fix.
// `device`: --device (cpu | cuda).
void validate_run_checks(const RunCheckArgs& c, bool have_save, const std::string& device);

// The start-up notes these flags call for ("" for none).
std::string run_checks_note(const RunCheckArgs& c);

}  // namespace mt
