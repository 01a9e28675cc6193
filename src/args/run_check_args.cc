#include "args/run_check_args.h"

#include "core/error.h"

namespace mt {

void validate_run_checks(const RunCheckArgs& c, bool have_save, const std::string& device) {
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
  MT_CHECK(c.rerun_mode == "disabled" || device == "cpu", "--rerun-mode ", c.rerun_mode,
           " with --device ", device, " is not built: Megatron re-runs a failed iteration in "
           "place, then from a checkpoint on another GPU, and this build concludes after the "
           "in-place re-run because CPU ranks compute the same bits (train/rerun_check.h), which "
           "does not hold across GPUs; fix: --rerun-mode disabled (NaN/Inf still stop the run) "
           "or --device cpu");
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
