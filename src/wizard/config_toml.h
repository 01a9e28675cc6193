// The file `megatron config` writes: a TOML file of `flag-name = value` lines
// that `megatron train --config` and `megatron plan --config` both read
// (flags/config_file.h). The model, layout and batch flags both commands take
// are at the top level; flags only train takes under [train]; the cluster,
// which only plan takes, under [plan]. Comments say the prediction and the
// command lines to launch with.
#pragma once
#include <cstdint>
#include <string>

#include "plan/plan_report.h"

namespace mt {

// What the questions answered besides the model and the layout.
struct ConfigCluster {
  std::string device;  // a device profile's name or FILE.json
  int64_t machines = 1, processes_per_machine = 1, threads_per_process = 1;
  double memory_gb = 0;  // what one process may hold (plan --device-memory-gb)
};

// The TOML text for `model_name` (a named size or "custom") in `pb` with the
// chosen layout `r` (evaluated on the cluster); `path`: where it is written
// (for the launch lines).
std::string config_toml(const std::string& model_name, const PlanProblem& pb,
                        const PlanResult& r, const ConfigCluster& cluster,
                        const std::string& path);

}  // namespace mt
