// megatron: train | generate | score | serve | preprocess | convert | plan |
// config. Every error becomes one line on stderr and a non-zero exit; in a
// multi-rank job the whole job is aborted so that no rank waits for one that
// died. A command line refused is said once, by rank 0 (every rank parses the
// same one).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "flags/config_file.h"
#include "flags/unknown_flag.h"
#include "core/error.h"
#include "core/log.h"
#include "comm/mpi_env.h"

int main(int argc, char** argv) {
  // Every rank parses the same command line: its refusal is said by rank 0.
  FILE* const err = mt::launcher_rank() == 0 ? stderr : nullptr;
  const auto say = [err](const std::string& line) {
    if (err != nullptr) std::fprintf(err, "error: %s\n", line.c_str());
  };
  // `megatron train ...` and the other commands on the public API: the
  // library's class for it parses the words and runs.
  if (argc >= 2)
    for (const mt::WordsCommandEntry& c : mt::kWordsCommands)
      if (argv[1] == std::string(c.name))
        return c.run(std::vector<std::string>(argv + 2, argv + argc), say);
  CLI::App app{"megatron.cpp: Megatron-LM's GPT training as one native binary"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "megatron.cpp 0.1");
  std::map<CLI::App*, mt::Command> commands;
  // Listed by `megatron --help`; their flags are the library's (kWordsCommands).
  std::map<CLI::App*, mt::WordsCommand> words_commands;
  for (const mt::WordsCommandEntry& c : mt::kWordsCommands)
    words_commands[app.add_subcommand(c.name, c.about)->prefix_command()] = c.run;
  // The words after a command on the public API's name, when not argv[1].
  const auto words_command = [&]() -> std::pair<mt::WordsCommand, std::vector<std::string>> {
    for (const auto& [sub, run] : words_commands)
      if (sub->parsed()) {
        std::vector<std::string> words(argv + 1, argv + argc);
        words.erase(words.begin(),
                    std::find(words.begin(), words.end(), sub->get_name()) + 1);
        return {run, words};
      }
    return {nullptr, {}};
  };
  CLI::App* serve = app.add_subcommand(
      "serve", "Megatron's text generation API and an OpenAI-compatible one over a checkpoint");
  commands[serve] = mt::add_serve_command(*serve);
  CLI::App* pre = app.add_subcommand("preprocess", "tokenize text into a Megatron .bin/.idx dataset");
  commands[pre] = mt::add_preprocess_command(*pre);
  CLI::App* conv = app.add_subcommand(
      "convert", "convert Hugging Face gpt2/llama folders <-> megatron.cpp checkpoints");
  commands[conv] = mt::add_convert_command(*conv);
  CLI::App* plan = app.add_subcommand(
      "plan", "memory and step time of every TP/PP/DP layout of a model on a cluster (no ranks)");
  commands[plan] = mt::add_plan_command(*plan);
  CLI::App* config = app.add_subcommand(
      "config", "a few questions (cluster, model, layout from plan), then a TOML file for "
      "train --config and plan --config");
  commands[config] = mt::add_config_command(*config);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    MT_CHECK(std::find(mt::kMegatronCommands.begin(), mt::kMegatronCommands.end(),
                       sub->get_name()) != mt::kMegatronCommands.end(),
             "internal: add `", sub->get_name(), "` to flags/config_file.h's kMegatronCommands");
  std::vector<std::string> args;  // as given, --config files expanded
  try {
    args = mt::expand_config_args(argc, argv, app);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first
    app.parse(std::move(reversed));
  } catch (const mt::Error& e) {
    say(e.what());
    return 2;
  } catch (const CLI::ParseError& e) {
    // `megatron --help train`: train's usage, as `megatron train --help` prints it.
    const auto [run, words] = words_command();
    if (e.get_exit_code() == 0 && run != nullptr) return run({"--help"}, say);
    if (e.get_exit_code() == 0) return app.exit(e);
    if (run != nullptr) return run(words, say);
    CLI::App* parsed = app.get_subcommands().empty() ? &app : app.get_subcommands()[0];
    const std::string sub = parsed == &app ? "" : " " + parsed->get_name();
    // A misspelt flag leaves a required one unset too, and CLI11 checks the
    // required ones first: name the argument it did not know, the one to fix.
    std::string what = e.what();
    std::vector<std::string> unknown = parsed->remaining();
    std::reverse(unknown.begin(), unknown.end());  // CLI11 was given the arguments last-first
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !unknown.empty())
      what = CLI::ExtrasError(unknown).what();
    // An unknown flag: refused by name if it is a Megatron flag this build
    // lacks on purpose, else named with the nearest flag the command has.
    const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ||
                        dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
    // The first unknown flag in the order given.
    const auto flag = std::find_if(args.begin(), args.end(), [&](const std::string& a) {
      return a.rfind("--", 0) == 0 && std::find(unknown.begin(), unknown.end(), a) != unknown.end();
    });
    if (extras && parsed != &app && flag != args.end()) {
      say(mt::unknown_flag_message(*flag, *parsed));
      return 2;
    }
    say(what + "; see `megatron" + sub + " --help`");
    return 2;
  }
  if (const auto [run, words] = words_command(); run != nullptr) return run(words, say);
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
