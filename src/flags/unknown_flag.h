// What to say about a flag a subcommand does not know: Megatron-LM flags whose
// meaning this build lacks are refused by name with the reason and what to
// use instead (fp8 / fp4 number formats, Weights & Biases, PyTorch FSDP2);
// any other gets the nearest flag the subcommand has.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace mt {

// One line (without "error: "), e.g. "unknown flag --train-iter; the nearest
// flag of `megatron train` is --train-iters; see `megatron train --help`".
std::string unknown_flag_message(const std::string& flag, const CLI::App& command);

}  // namespace mt
