// The subcommands of the `megatron` binary. `train` hands its words to the
// library's megatron::Trainer; each other registers its flags on a CLI11
// subcommand and returns the function that runs it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mt {

using Command = std::function<int()>;

// `megatron train FLAGS...`: the flags after `train`, as given, handed to
// megatron::Trainer (include/megatron/trainer.h), whose parse is the
// command's (--config, --help, refusals); a refusal goes to `say`, one line.
// Returns what the binary exits with: 0, or 2 for flags refused (the run's
// own errors end the job in the Trainer).
int run_train_command(const std::vector<std::string>& flags,
                      const std::function<void(const std::string&)>& say);
Command add_generate_command(CLI::App& app);
Command add_preprocess_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
Command add_score_command(CLI::App& app);
// `megatron serve`: Megatron's and OpenAI's HTTP APIs over a checkpoint.
Command add_serve_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
// `megatron config`: questions, then a TOML file train --config and plan --config read.
Command add_config_command(CLI::App& app);

}  // namespace mt
