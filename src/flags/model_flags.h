// The model flags of `megatron train` (one per ModelConfig field that has a
// Megatron flag: for_each_model_field), registered on a CLI11 option group;
// `megatron plan` takes the same ones.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/config.h"

namespace mt {

// Registers every model flag bound to `m`; returns (JSON key, option) pairs,
// so a caller can tell which ones were given.
std::vector<std::pair<std::string, CLI::Option*>> add_model_flags(CLI::Option_group& group,
                                                                  ModelConfig& m);

}  // namespace mt
