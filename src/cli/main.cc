// megatron: train | generate | preprocess | convert. Every error becomes one line on
// stderr and a non-zero exit; in a multi-rank job the whole job is aborted so
// that no rank waits for one that died.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "core/error.h"
#include "dist/mpi_env.h"

int main(int argc, char** argv) {
  CLI::App app{"megatron.cpp: Megatron-LM's GPT training as one native binary"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "megatron.cpp 0.1");
  std::map<CLI::App*, mt::Command> commands;
  CLI::App* train = app.add_subcommand("train", "train a GPT model (launch with mpirun for many ranks)");
  commands[train] = mt::add_train_command(*train);
  CLI::App* gen = app.add_subcommand("generate", "generate text from a checkpoint");
  commands[gen] = mt::add_generate_command(*gen);
  CLI::App* pre = app.add_subcommand("preprocess", "tokenize text into a Megatron .bin/.idx dataset");
  commands[pre] = mt::add_preprocess_command(*pre);
  CLI::App* conv = app.add_subcommand(
      "convert", "convert Hugging Face gpt2/llama folders <-> megatron.cpp checkpoints");
  commands[conv] = mt::add_convert_command(*conv);
  try {
    std::vector<std::string> args = mt::expand_config_args(argc, argv);
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector last-first
    app.parse(std::move(args));
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s; see `megatron %s --help`\n", e.what(),
                 app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name().c_str());
    return 2;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
  } catch (const mt::Error& e) {
    mt::abort_job(e.what());
  } catch (const std::exception& e) {
    mt::abort_job(std::string("unexpected error: ") + e.what());
  }
  return 0;
}
