// `megatron train`: a client of the library's public API. The flags after
// `train` go to megatron::Trainer as given; it parses them (--config files,
// --help, one line naming a refused flag) and runs the loop.
#include <cstdio>

#include "cli/commands.h"
#include "megatron/trainer.h"

namespace mt {

int run_train_command(const std::vector<std::string>& flags,
                      const std::function<void(const std::string&)>& say) {
  try {
    megatron::Trainer trainer(flags);
    return trainer.run();
  } catch (const megatron::FlagHelp& help) {
    std::fputs(help.what(), stdout);
    return 0;
  } catch (const megatron::FlagError& e) {
    say(e.what());
    return 2;
  }
}

}  // namespace mt
