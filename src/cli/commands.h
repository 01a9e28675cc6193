// The subcommands of the `megatron` binary. Each registers its flags on a
// CLI11 subcommand and returns the function that runs it.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

#include "train/trainer.h"

namespace mt {

using Command = std::function<int()>;

// `hooks`: a library client's callbacks (include/megatron/trainer.h).
Command add_train_command(CLI::App& app, TrainHooks hooks = {});
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
