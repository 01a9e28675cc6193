// megatron/flags.h — what the library's command classes throw for flags they
// refuse. Every class of the public API that takes a `megatron` command's
// words (megatron::Trainer takes `train`'s) parses them as the binary does:
// Megatron-LM's names, `--config FILE`, one line naming a refused flag and
// the fix, --help as the command's usage.
#pragma once
#include <stdexcept>

namespace megatron {

// Flags the command would refuse (the message names the flag and the fix).
struct FlagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// --help among the flags: what() is the usage, as `megatron COMMAND --help`
// prints it (a FlagError too).
struct FlagHelp : FlagError {
  using FlagError::FlagError;
};

}  // namespace megatron
