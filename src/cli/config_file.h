// `--config FILE`: a TOML file of `flag-name = value` lines standing in for
// flags. Expanded into command-line arguments placed before the real ones, so
// a flag given on the command line wins (the file's value of it is dropped).
// (CLI11 2.1 reads config files only for the top-level app, not a subcommand.)
#pragma once
#include <string>
#include <vector>

namespace mt {

// argv with every `--config FILE` (or `--config=FILE`) expanded in place of
// the subcommand's first argument: [sub, <from files>..., <rest of argv>].
std::vector<std::string> expand_config_args(int argc, char** argv);

}  // namespace mt
