// A `megatron` command's words parsed by the library as the binary parses a
// command line, for the public classes that take them (megatron::Trainer and
// the other commands' classes): --config files expanded, a refusal as
// megatron::FlagError naming the flag (and the nearest one the command has),
// --help as megatron::FlagHelp holding the command's usage.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mt {

// `app` holds the one subcommand `command` (its flags declared); `flags` are
// the words after `megatron <command's name>`. Throws megatron::FlagError /
// megatron::FlagHelp (include/megatron/flags.h).
void parse_command_words(CLI::App& app, CLI::App& command, const std::vector<std::string>& flags);

}  // namespace mt
