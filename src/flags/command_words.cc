#include "flags/command_words.h"

#include <algorithm>

#include "core/error.h"
#include "flags/config_file.h"
#include "flags/unknown_flag.h"
#include "megatron/flags.h"

namespace mt {

void parse_command_words(CLI::App& app, CLI::App& command, const std::vector<std::string>& flags) {
  std::vector<std::string> words = {"megatron", command.get_name()};
  words.insert(words.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  std::vector<std::string> args;
  try {
    args = expand_config_args(int(argv.size()), argv.data(), app);
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them last-first
  } catch (const Error& e) {
    throw megatron::FlagError(e.what());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0)  // --help: the usage, as `megatron COMMAND --help` prints it
      throw megatron::FlagHelp(command.help());
    // A misspelt flag leaves a required one unset too, and CLI11 checks the
    // required ones first: name the first word it did not know, the one to fix.
    std::vector<std::string> unknown = command.remaining();
    const auto flag = std::find_if(args.begin(), args.end(), [&](const std::string& a) {
      return a.rfind("--", 0) == 0 && std::find(unknown.begin(), unknown.end(), a) != unknown.end();
    });
    if (flag != args.end()) throw megatron::FlagError(unknown_flag_message(*flag, command));
    throw megatron::FlagError(std::string(e.what()) + "; see `megatron " + command.get_name() +
                              " --help`");
  }
}

}  // namespace mt
