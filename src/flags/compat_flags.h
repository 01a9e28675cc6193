// Megatron-LM flags that choose GPU kernels, fusions, checkpoint back-ends or
// data-loader mechanics (args/inert_flags.h). Megatron's example scripts pass
// them; here they change nothing (the CPU kernels are this build's own, the
// checkpoint format is its own re-shardable one, data is memory-mapped
// in-process), so `train` accepts them — each with the values Megatron
// accepts — and one start-up note lists those given. Flags whose meaning Megatron has and this build lacks are
// refused by name in flags/unknown_flag.h instead.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mt {

// Registers the flags on `app`; the returned function, called after parsing,
// gives those the command line set ("--attention-backend auto", "--use-mcore-models")
// and throws mt::Error for a value Megatron would refuse.
std::function<std::vector<std::string>()> add_inert_megatron_flags(CLI::App& app);

}  // namespace mt
