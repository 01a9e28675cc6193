// Megatron's --log-progress: rank 0 appends lines to <save>/progress.txt,
//   <YYYY-MM-DD HH:MM:SS>\tJob ID: <SLURM_JOB_ID>\t# GPUs: <world size>\t<event>
// where the event is "Starting job", "Saved checkpoint\tIteration: N\tJob
// throughput: X TFLOP/s/GPU\tCumulative throughput: Y TFLOP/s/GPU\t
// Floating-point operations: F\tTokens (in billions): T", or with
// --async-save "Saving async checkpoint\t..." (the same fields) when a save
// starts and "Saved async checkpoint\tIteration: N" when it is committed.
// Job throughput counts this job's operations since it started; cumulative
// throughput counts from the first "Starting job" line of the latest run of
// jobs with this world size (Megatron's get_start_time_from_progress_log).
#pragma once
#include <cstdint>
#include <string>

namespace mt {

class ProgressLog {
 public:
  ProgressLog() = default;
  // Rank 0 with --log-progress: appends "Starting job"; others: inactive.
  // `flops_at_start`: the operations of the loaded checkpoint.
  ProgressLog(const std::string& save_dir, int world_size, bool active, double flops_at_start);
  // After a save of `iteration` (async: when it starts) with `flops` operations and `tokens` so far.
  void checkpoint(int64_t iteration, double flops, int64_t tokens, bool async);
  void async_committed(int64_t iteration);

 private:
  void append(const std::string& event);
  std::string path_;
  int world_size_ = 1;
  bool active_ = false;
  double flops_at_start_ = 0;
  double start_seconds_ = 0;  // this job's start (seconds since the epoch)
};

}  // namespace mt
