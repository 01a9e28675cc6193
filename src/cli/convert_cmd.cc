// `megatron convert`: a client of the library's public API. The flags after
// `convert` (Megatron-LM's tools/checkpoint/convert.py names) go to
// megatron::Converter as given; it parses them (--config files, --help, one
// line naming a refused flag) and converts.
#include "commands.h"
#include "megatron/convert.h"

namespace mt {

int run_convert_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Converter(words).run(); });
}

}  // namespace mt
