// `megatron config`: a client of the library's public API. The flags after
// `config` go to megatron::ConfigQuestions as given; it parses them (--help,
// one line naming a refused flag), asks on this terminal and writes the file.
#include "commands.h"
#include "megatron/config.h"

namespace mt {

int run_config_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::ConfigQuestions(words).run(); });
}

}  // namespace mt
