// `megatron train`'s --optimizer, --sgd-momentum, --decoupled-lr, the
// weight-decay schedule and the scheduler's resume rule (args/optimizer_args.h
// says what each means), in the "optimizer" group of the help.
#pragma once
#include <CLI/CLI.hpp>

#include "args/optimizer_args.h"
#include "optim/optimizer.h"

namespace mt {

void add_optimizer_flags(CLI::Option_group* g, OptimizerArgs* o, OptimizerConfig* cfg);

}  // namespace mt
