// `megatron train`: a client of the library's public API. The flags after
// `train` go to megatron::Trainer as given; it parses them (--config files,
// --help, one line naming a refused flag) and runs the loop.
#include "commands.h"
#include "megatron/trainer.h"

namespace mt {

int run_train_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Trainer(words).run(); });
}

}  // namespace mt
