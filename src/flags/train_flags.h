// `megatron train`'s flags, declared once: the binary's `train` (through
// megatron::Trainer), megatron::Trainer itself, and `megatron config`'s check
// of the file it writes all register them with add_train_flags.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

#include "args/args.h"

namespace mt {

// The `train` subcommand of `parent`, with its description (what `megatron
// --help` lists and `megatron train --help` prints first); no flags yet.
CLI::App* add_train_subcommand(CLI::App& parent);

// `megatron train`'s flags on `app`; the function returned, called after the
// parse, gives the run's arguments (the list flags and --data-args-path
// read; throws mt::Error as the command would).
std::function<TrainArgs()> add_train_flags(CLI::App& app);

}  // namespace mt
