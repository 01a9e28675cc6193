// `megatron score`: a client of the library's public API. The flags after
// `score` go to megatron::Scorer as given; it parses them (--config files,
// --help, one line naming a refused flag), scores --input per document and
// writes the JSON lines.
#include "commands.h"
#include "megatron/scoring.h"

namespace mt {

int run_score_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Scorer(words).run(); });
}

}  // namespace mt
