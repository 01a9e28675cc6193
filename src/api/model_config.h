// megatron::ModelConfig (include/megatron/config.h) <-> the library's own
// mt::ModelConfig (model/config.h): the same fields by the same names, copied
// one to one (tests/api/config_test.cc checks that none is missed), and
// mt::Error as megatron::ConfigError.
#pragma once
#include <string>

#include "core/error.h"
#include "megatron/config.h"
#include "model/config.h"

namespace mt {

ModelConfig private_model_config(const megatron::ModelConfig& m);
megatron::ModelConfig public_model_config(const ModelConfig& m);

// An mt::Error's message without its "file.cc:123: " prefix.
std::string error_message(const Error& e);

// `f()`, an mt::Error in it thrown as megatron::ConfigError with its message
// (less the "file.cc:123: " prefix).
template <class F>
auto config_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw megatron::ConfigError(error_message(e));
  }
}

}  // namespace mt
