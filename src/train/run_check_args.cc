#include "train/run_check_args.h"

#include "core/error.h"

namespace mt {

void validate_run_checks(const RunCheckArgs& c, bool have_save) {
  MT_CHECK(c.timing_log_level >= 0 && c.timing_log_level <= 2, "--timing-log-level ",
           c.timing_log_level, " is not one of Megatron's levels; fix: 0, 1 or 2");
  MT_CHECK(c.timing_log_option == "max" || c.timing_log_option == "minmax" ||
               c.timing_log_option == "all",
           "--timing-log-option ", c.timing_log_option,
           " is not one of Megatron's choices; fix: max, minmax or all");
  MT_CHECK(c.rerun_mode == "disabled" || c.rerun_mode == "validate_results" ||
               c.rerun_mode == "report_stats",
           "--rerun-mode ", c.rerun_mode,
           " is not one of Megatron's choices; fix: disabled, validate_results or report_stats");
  MT_CHECK(c.rerun_mode == "disabled", "--rerun-mode ", c.rerun_mode,
           " is not built: Megatron's rerun state machine re-runs an iteration (in place, then "
           "from a checkpoint on another GPU) to tell a faulty device from a true NaN or spike, "
           "and this build has no re-run of an iteration (its CPU runs are deterministic: a re-run "
           "gives the same bits); fix: --rerun-mode disabled (NaN/Inf still stop the run, "
           "--check-for-spiky-loss warns)");
  MT_CHECK(!c.log_progress || have_save,
           "--log-progress writes progress.txt into the --save folder, and no --save was given; "
           "fix: add --save DIR or leave out --log-progress");
}

std::string run_checks_note(const RunCheckArgs& c) {
  std::string note;
  if (c.deterministic_mode)
    note += "--deterministic-mode: CPU runs here are deterministic without it (the same flags, "
            "layout and thread count give bit-identical losses and checkpoints); ";
  if (c.timing_log_level == 2)
    note += "--timing-log-level 2: the finer timers (forward-compute, backward-compute, the "
            "pipeline's send/recv) are not measured apart here; level 1's are logged; ";
  if (!note.empty()) note.resize(note.size() - 2);
  return note;
}

}  // namespace mt
