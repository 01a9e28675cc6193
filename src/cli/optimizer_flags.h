// `megatron train`'s --optimizer, --sgd-momentum, --decoupled-lr, the
// weight-decay schedule and the scheduler's resume rule (train/optimizer_args.h
// says what each means), in the "optimizer" group of the help.
#pragma once
#include <CLI/CLI.hpp>

#include "optim/optimizer.h"
#include "train/optimizer_args.h"

namespace mt {

void add_optimizer_flags(CLI::Option_group* g, OptimizerArgs* o, OptimizerConfig* cfg);

}  // namespace mt
