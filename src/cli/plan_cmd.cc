// `megatron plan`: a client of the library's public API. The flags after
// `plan` go to megatron::Planner as given; it parses them (--config files,
// --help, one line naming a refused flag) and prints the layouts or calibrates.
#include "commands.h"
#include "megatron/plan.h"

namespace mt {

int run_plan_command(const std::vector<std::string>& words, const Say& say) {
  return run_words(say, [&] { return megatron::Planner(words).run(); });
}

}  // namespace mt
