// --profile: the timeline of Megatron's profiled iterations, all profiled
// ranks merged into one Trace Event Format file (opens in Perfetto and
// chrome://tracing), one track per rank named by its coordinates.
//
// Per rank the events go to a preallocated core/timeline.h recorder that the
// rank's communicators, the pipeline executor, gradient sync, the optimizer
// step and checkpoint saves add spans to (ParallelState::set_timeline). When
// `start` iterations are done every rank passes a barrier and the profiled
// ones set their clock's origin; when `end` are done (or training ends
// first) the events are gathered to world rank 0, which writes the file
// atomically (temp name, rename) and prints its path.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "args/profile_args.h"
#include "comm/parallel_state.h"
#include "core/timeline.h"

namespace mt {

// Checks the flags (the same verdict on every rank, before any collective):
// a range that is empty or inverted, a negative start, a rank outside the run.
void validate_profile_args(const ProfileArgs& a, int world_size);

// Where the trace goes: --profile-dir, else --tensorboard-dir (where
// Megatron's PyTorch profiler writes), else --save, else ".".
std::string profile_output_dir(const ProfileArgs& a, const std::string& tensorboard_dir,
                               const std::string& save);

// "rank 3 (TP 1, PP 1, DP 0)" (CP and EP added when > 1).
std::string rank_label(const ParallelState& ps);

class Profiler {
 public:
  // Off unless a.enabled. Validates the flags, and on world rank 0 that the
  // output folder can be written (created if missing; the verdict is
  // broadcast, so a refusal ends every rank with one line). Collective.
  // `events_per_iteration` sizes the buffer; `train_iters` and
  // `first_iteration` (the iteration training resumes after) say which part
  // of the range runs.
  // tensorboard_dir, save: for profile_output_dir.
  Profiler(const ProfileArgs& a, ParallelState& ps, const std::string& tensorboard_dir,
           const std::string& save, int64_t train_iters,
           int64_t first_iteration, size_t events_per_iteration);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // The recorder of this rank while profiling is on and it is profiled, else null.
  Timeline* timeline() const { return timeline_.get(); }
  // At the top of the loop, `done` iterations done (Megatron's `iteration`):
  // at done == start, a world barrier, then the profiled ranks start recording.
  void before_iteration(int64_t done);
  // After the iteration's checkpoint and exit decisions: at done == end the
  // range is gathered and written. Collective at that iteration.
  void after_iteration(int64_t done);
  // After the loop: a range still open (end past the last iteration, or an
  // early exit) is written now. Collective.
  void finish();
  // The trace's path once written, else "".
  const std::string& path() const { return path_; }

 private:
  void write(int64_t last_iteration);

  ProfileArgs args_;
  ParallelState& ps_;
  std::string dir_;
  std::unique_ptr<Timeline> timeline_;  // profiled ranks only
  bool open_ = false;                   // recording started, not yet written
  std::string path_;
};

}  // namespace mt
