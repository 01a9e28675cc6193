// megatron: train | generate | score | serve | preprocess | convert | plan |
// config — one client of the library's public API (include/megatron/): each
// command's words go to the library class that parses and runs them
// (kWordsCommands). Every error becomes one line on stderr and a non-zero
// exit; in a multi-rank job the library ends the whole job so that no rank
// waits for one that died. A command line refused is said once, by rank 0
// (every rank parses the same one).
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "megatron/parallel_state.h"

namespace {

constexpr const char* kAbout = "megatron.cpp: Megatron-LM's GPT training as one native binary";

void print_usage() {
  std::printf("%s\nUsage: megatron [OPTIONS] SUBCOMMAND\n\nOptions:\n"
              "  -h,--help                   Print this help message and exit\n"
              "  --version                   Display program version information and exit\n\n"
              "Subcommands:\n", kAbout);
  for (const mt::WordsCommandEntry& c : mt::kWordsCommands)
    std::printf("  %-28s%s\n", c.name, c.about);
  std::printf("\n`megatron SUBCOMMAND --help` for a command's flags.\n");
}

}  // namespace

int main(int argc, char** argv) {
  FILE* const err = megatron::launcher_rank() == 0 ? stderr : nullptr;
  const auto say = [err](const std::string& line) {
    if (err != nullptr) std::fprintf(err, "error: %s\n", line.c_str());
  };
  const std::vector<std::string> args(argv + 1, argv + argc);
  // `megatron --help train` (help first): the command's usage.
  size_t first = 0;
  const bool help_first = !args.empty() && (args[0] == "--help" || args[0] == "-h");
  if (help_first) first = 1;
  if (args.size() > first)
    for (const mt::WordsCommandEntry& c : mt::kWordsCommands)
      if (args[first] == c.name)
        return c.run(help_first ? std::vector<std::string>{"--help"}
                                : std::vector<std::string>(args.begin() + 1, args.end()),
                     say);
  if (help_first) {
    print_usage();
    return 0;
  }
  if (!args.empty() && args[0] == "--version") {
    std::printf("megatron.cpp 0.1\n");
    return 0;
  }
  if (args.empty()) {
    say("a subcommand is required; see `megatron --help`");
    return 2;
  }
  std::string names;
  for (const mt::WordsCommandEntry& c : mt::kWordsCommands)
    names += std::string(names.empty() ? "" : ", ") + c.name;
  if (args[0].rfind("-", 0) == 0)
    say("unknown flag " + args[0] + " of `megatron` (a flag goes after its command: " + names +
        "); see `megatron --help`");
  else
    say("unknown command `" + args[0] + "`; the commands are " + names +
        "; see `megatron --help`");
  return 2;
}
