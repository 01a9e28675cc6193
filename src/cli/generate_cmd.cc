// `megatron generate`: a client of the library's public API. The flags after
// `generate` go to megatron::Generator as given; it parses them (--config
// files, --help, one line naming a refused flag), loads the checkpoint and
// streams the text.
#include "commands.h"
#include "megatron/decoding.h"

namespace mt {

int run_generate_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Generator(words).run(); });
}

}  // namespace mt
