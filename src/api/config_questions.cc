// megatron::ConfigQuestions (include/megatron/config.h): `megatron config`'s
// flags parsed from its words, and its run (wizard/config_command.h: the
// questions on the caller's streams, the TOML file written). The binary's
// `config` (cli/config_cmd.cc) is a client of it.
#include <iostream>

#include "api/job_errors.h"
#include "comm/mpi_env.h"
#include "core/error.h"
#include "flags/command_words.h"
#include "wizard/config_command.h"

namespace megatron {

struct ConfigQuestions::Impl {
  ConfigOptions options;
};

ConfigQuestions::ConfigQuestions(ConfigOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

ConfigQuestions::ConfigQuestions(const std::vector<std::string>& words)
    : impl_(std::make_unique<Impl>()) {
  CLI::App app{"megatron.cpp as a library: megatron config"};
  app.require_subcommand(1);
  CLI::App* config = mt::add_config_subcommand(app);
  mt::add_config_flags(*config, &impl_->options);
  mt::parse_command_words(app, *config, words);
}

ConfigQuestions::~ConfigQuestions() = default;

int ConfigQuestions::run(std::istream& in, std::ostream& out) {
  return mt::ending_job_on_error([&] { return mt::run_config(impl_->options, in, out); });
}

int ConfigQuestions::run() { return run(std::cin, std::cout); }

}  // namespace megatron
