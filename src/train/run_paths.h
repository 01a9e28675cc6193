// What `megatron train` reads and writes, for core/output_guard.h: no output
// flag (--save, --log-json, --tensorboard-dir, --profile-dir, --data-cache-path)
// may replace, append to or write into an input (the --load checkpoint, the
// datasets and their tokenizer records, the tokenizer files, the --config
// files). --save may be the --load folder (a resume saves beside it).
#pragma once
#include "args/args.h"
#include "core/output_guard.h"

namespace mt {

OutputGuard train_output_guard(const TrainArgs& args);

}  // namespace mt
