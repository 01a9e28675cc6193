// How a run saves its checkpoints (Megatron's save_checkpoint_and_time with
// --async-save, --no-save-optim and --log-progress): synchronously, or
// started in the background (checkpoint/async_save.h) and committed by
// poll() at the first iteration every rank's writer is done, or by wait() —
// which the next save and the end of the run call first.
#pragma once
#include <cstdint>
#include <string>

#include "args/args.h"
#include "checkpoint/async_save.h"
#include "core/log.h"
#include "observe/progress_log.h"

namespace mt {

class RunSaver {
 public:
  // `flops_per_sample`: the model's operations per trained sequence
  // (progress.txt); `start_samples`: the loaded checkpoint's consumed samples.
  // --async-save: the host copy is allocated here, for `reg`'s weights and
  // `opt`'s state (memory/memory_report.h async_save_copy_bytes).
  RunSaver(const TrainArgs& args, const ParallelState& ps, double flops_per_sample,
           int64_t start_samples, const ParamRegistry& reg, const AdamWOptimizer& opt);
  // Collective. `tty`: rank 0's progress line is cleared first.
  void save(const RunState& state, const ParamRegistry& reg, const SavedWeights& params,
            const AdamWOptimizer* opt, const ParallelState& ps, bool tty);
  void poll(const ParallelState& ps);  // collective, cheap while nothing is pending
  void wait(const ParallelState& ps);  // collective
  // --async-save's host copy (0 without): the measured side of --log-memory's line.
  double host_copy_bytes() const { return double(async_.bytes()); }

 private:
  void committed(const ParallelState& ps);
  const TrainArgs& args_;
  double flops_per_sample_;
  ProgressLog progress_;
  AsyncCheckpointSaver async_;
  Timer async_timer_;  // since the pending async save started
};

}  // namespace mt
