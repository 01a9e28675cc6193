// What a run checks and prepares before anything is read or written, each
// decided on world rank 0 and its refusal broadcast, so that a refused job
// ends on every rank with rank 0's line and no rank is left waiting in a
// collective: outputs against inputs (train/run_paths.h), the --save folder's
// lock and repair, and the datasets' record against the loaded checkpoint's.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "args/args.h"
#include "checkpoint/dir_lock.h"
#include "comm/parallel_state.h"

namespace mt {

// No output flag may replace, append to or write into what the run reads.
void check_outputs_against_inputs(const TrainArgs& args, const ParallelState& ps);

// One writer per --save (checkpoint/dir_lock.h): rank 0 creates the folder and
// locks it for the whole run (held by the returned lock) before any rank
// writes there.
DirLock lock_save_dir(const TrainArgs& args, const ParallelState& ps);

// Refuses a --save that holds checkpoints this run did not load, repairs what
// a crash left there, and finds out now if a rank cannot write it
// (checkpoint/checkpoint_dir.h).
void prepare_save_dir(const TrainArgs& args, int64_t loaded_iteration, const ParallelState& ps);

// Records the datasets' sizes and checksums in the run's record (what every
// checkpoint saves) and, resuming training, stops when they changed since the
// loaded checkpoint (train/data_fingerprint.h; --allow-changed-data warns).
void record_and_check_datasets(const TrainArgs& args, int64_t loaded_iteration,
                               nlohmann::json& run_args, const ParallelState& ps);

}  // namespace mt
