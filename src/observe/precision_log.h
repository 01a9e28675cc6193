// The start-up line that says what the GEMMs of --bf16 / --fp16 (or fp32 on
// a GPU) run on this machine.
#pragma once
#include "args/args.h"
#include "backend/device.h"

namespace mt {

// Logged on rank 0 (`rank0`); nothing for fp32 on the CPU.
void log_precision(const TrainArgs& args, bool rank0, Device device);

}  // namespace mt
