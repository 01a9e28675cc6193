// Megatron-LM's profiling flags (its arguments.py, _add_logging_args /
// profiling): --profile records a timeline of iterations [start, end) of the
// ranks named, in the Trace Event Format (observe/profiler.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct ProfileArgs {
  bool enabled = false;  // --profile
  // --profile-step-start / --profile-step-end, as Megatron counts them: the
  // timeline starts at the top of the loop when `start` iterations are done
  // and stops once `end` are (after that iteration's checkpoint save), so it
  // holds the iterations logged as start + 1 .. end.
  int64_t step_start = 10;
  int64_t step_end = 12;
  std::vector<int> ranks = {0};  // --profile-ranks (world ranks)
  // --profile-dir (this build's flag, not Megatron's): where the trace goes;
  // "": --save, else the working directory.
  std::string dir;
  // --use-pytorch-profiler: accepted (Megatron's flag), changes nothing: there
  // is no PyTorch here, and the timeline is already a Chrome trace.
  bool use_pytorch_profiler = false;
};

}  // namespace mt
