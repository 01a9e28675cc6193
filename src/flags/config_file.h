// `--config FILE`: a TOML file of `flag-name = value` lines standing in for
// flags. Expanded into command-line arguments placed before the real ones, so
// a flag given on the command line wins (the file's value of it is dropped).
// (CLI11 2.1 reads config files only for the top-level app, not a subcommand.)
#pragma once
#include <array>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mt {

// The commands of `megatron` (main.cc registers each): a config file's
// sections are named for them, whoever reads it (the binary, or
// megatron::Trainer, which has only `train`).
constexpr std::array<const char*, 8> kMegatronCommands = {
    "config", "convert", "generate", "plan", "preprocess", "score", "serve", "train"};

// argv with every `--config FILE` (or `--config=FILE`) expanded in place of
// the subcommand's first argument: [sub, <from files>..., <rest of argv>].
// Each file's keys are checked against the flags of `app`'s subcommand
// argv[1] (a key that is no flag, a key set twice, a list for a one-value
// flag: one line naming the file, the key and the fix); a TOML array for
// --moe-layer-freq is Megatron's list ([0,1] -> "[0,1]"). Keys under a
// section named for a command of kMegatronCommands ([train], [plan]) are
// that command's only: the others skip them; any other section is refused.
std::vector<std::string> expand_config_args(int argc, char** argv, const CLI::App& app);

}  // namespace mt
