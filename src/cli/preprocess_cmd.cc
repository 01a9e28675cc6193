// `megatron preprocess`: a client of the library's public API. The flags
// after `preprocess` (Megatron-LM's tools/preprocess_data.py names) go to
// megatron::Preprocessor as given; it parses them (--config files, --help,
// one line naming a refused flag) and writes the .bin/.idx datasets.
#include "commands.h"
#include "megatron/dataset.h"

namespace mt {

int run_preprocess_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Preprocessor(words).run(); });
}

}  // namespace mt
