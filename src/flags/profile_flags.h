// `megatron train`'s profiling flags (Megatron-LM's --profile,
// --profile-step-start, --profile-step-end, --profile-ranks,
// --use-pytorch-profiler; and --profile-dir), in their own help group.
#pragma once
#include <CLI/CLI.hpp>

#include "args/profile_args.h"

namespace mt {

void add_profile_flags(CLI::App& app, ProfileArgs* p);

}  // namespace mt
