// The subcommands of the `megatron` binary, each a client of the library's
// public API (include/megatron/): the words after the command's name go to
// the library class that parses them (--config, --help, refusals:
// include/megatron/flags.h) and runs.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace mt {

// What a command says about flags it refuses: one line (main.cc prefixes
// "error: " and says it on rank 0 only).
using Say = std::function<void(const std::string&)>;

// A command: the words after its name, as given. Returns what the binary
// exits with: the run's own status, or 2 for flags refused (the run's own
// errors end the job in the library).
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
// `megatron serve FLAGS...`: megatron::Server (include/megatron/serving.h).
int run_serve_command(const std::vector<std::string>& words, const Say& say);
// `megatron preprocess FLAGS...`: megatron::Preprocessor (include/megatron/dataset.h).
int run_preprocess_command(const std::vector<std::string>& words, const Say& say);
// `megatron convert FLAGS...`: megatron::Converter (include/megatron/convert.h).
int run_convert_command(const std::vector<std::string>& words, const Say& say);
// `megatron plan FLAGS...`: megatron::Planner (include/megatron/plan.h).
int run_plan_command(const std::vector<std::string>& words, const Say& say);
// `megatron config FLAGS...`: megatron::ConfigQuestions (include/megatron/config.h).
int run_config_command(const std::vector<std::string>& words, const Say& say);

// The commands, by name (main.cc dispatches argv[1] and lists them).
struct WordsCommandEntry {
  const char* name;
  const char* about;  // one line, for `megatron --help`
  WordsCommand run;
};
extern const std::vector<WordsCommandEntry> kWordsCommands;

}  // namespace mt
