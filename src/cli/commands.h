// The subcommands of the `megatron` binary. Those on the public API
// (kWordsCommands: train, plan, config, preprocess, convert, serve) hand their
// words to a library class; each other still registers its flags on a CLI11
// subcommand and returns the function that runs it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mt {

using Command = std::function<int()>;

// What a command says about flags it refuses: one line (main.cc prefixes
// "error: " and says it on rank 0 only).
using Say = std::function<void(const std::string&)>;

// A command that is a client of the public API takes the words after its
// name, as given, and hands them to the library class that parses them
// (--config, --help, refusals: include/megatron/flags.h) and runs. Returns
// what the binary exits with: the run's own status, or 2 for flags refused
// (the run's own errors end the job in the library).
using WordsCommand = int (*)(const std::vector<std::string>& words, const Say& say);

// `body` builds the library's object from the words and runs it: a FlagHelp
// printed (exit 0), a FlagError said (exit 2), else body's status.
int run_words(const Say& say, const std::function<int()>& body);

// `megatron train FLAGS...`: megatron::Trainer (include/megatron/trainer.h).
int run_train_command(const std::vector<std::string>& words, const Say& say);
// `megatron plan FLAGS...`: megatron::Planner (include/megatron/plan.h).
int run_plan_command(const std::vector<std::string>& words, const Say& say);
// `megatron config FLAGS...`: megatron::ConfigQuestions (include/megatron/config.h).
int run_config_command(const std::vector<std::string>& words, const Say& say);
// `megatron preprocess FLAGS...`: megatron::Preprocessor (include/megatron/dataset.h).
int run_preprocess_command(const std::vector<std::string>& words, const Say& say);
// `megatron convert FLAGS...`: megatron::Converter (include/megatron/convert.h).
int run_convert_command(const std::vector<std::string>& words, const Say& say);
// `megatron serve FLAGS...`: megatron::Server (include/megatron/serving.h).
int run_serve_command(const std::vector<std::string>& words, const Say& say);

// The commands on the public API, by name (main.cc dispatches argv[1]).
struct WordsCommandEntry {
  const char* name;
  const char* about;  // one line, for `megatron --help`
  WordsCommand run;
};
extern const std::vector<WordsCommandEntry> kWordsCommands;

Command add_generate_command(CLI::App& app);
Command add_score_command(CLI::App& app);

}  // namespace mt
