// The subcommands of the `megatron` binary. Those on the public API
// (kWordsCommands: train, generate, score) hand their words to a library class; each other
// still registers its flags on a CLI11 subcommand and returns the function
// that runs it.
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
// `megatron generate FLAGS...`: megatron::Generator (include/megatron/decoding.h).
int run_generate_command(const std::vector<std::string>& words, const Say& say);
// `megatron score FLAGS...`: megatron::Scorer (include/megatron/scoring.h).
int run_score_command(const std::vector<std::string>& words, const Say& say);

// The commands on the public API, by name (main.cc dispatches argv[1]).
struct WordsCommandEntry {
  const char* name;
  const char* about;  // one line, for `megatron --help`
  WordsCommand run;
};
extern const std::vector<WordsCommandEntry> kWordsCommands;

Command add_preprocess_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
// `megatron serve`: Megatron's and OpenAI's HTTP APIs over a checkpoint.
Command add_serve_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
// `megatron config`: questions, then a TOML file train --config and plan --config read.
Command add_config_command(CLI::App& app);

}  // namespace mt
