// `megatron train`'s checkpoint-mechanics, check and logging flags of
// Megatron-LM (args/run_check_args.h says what each does here).
#pragma once
#include <CLI/CLI.hpp>

#include "args/run_check_args.h"

namespace mt {

void add_run_check_flags(CLI::App& app, RunCheckArgs* c);

}  // namespace mt
