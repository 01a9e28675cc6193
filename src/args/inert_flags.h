// Megatron-LM flags that choose GPU kernels, fusions, checkpoint back-ends or
// data-loader mechanics: Megatron's example scripts pass them and here they
// change nothing (flags/compat_flags.h registers them on `train`; the run's
// argument list compares them across ranks like every other flag).
#pragma once
#include <string>
#include <vector>

namespace mt {

// A flag as Megatron-LM's arguments.py declares it: a switch, a whole number,
// or one value of Megatron's choices.
struct InertFlag {
  const char* name;
  std::vector<std::string> choices;  // {}: a switch; {"*"}: a whole number; else the values
  const char* what;                  // what it selects in Megatron
};

const std::vector<InertFlag>& inert_megatron_flags();

}  // namespace mt
