// `megatron serve`: a client of the library's public API. The flags after
// `serve` go to megatron::Server as given; it parses them (--config files,
// --help, one line naming a refused flag), loads the checkpoint and serves
// Megatron's and OpenAI's APIs over HTTP until SIGINT or SIGTERM.
#include "commands.h"
#include "megatron/serving.h"

namespace mt {

int run_serve_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Server(words).run(); });
}

}  // namespace mt
