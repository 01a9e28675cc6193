// The message of the mt::Error a call throws, for tests of error lines.
#pragma once
#include <string>

#include "core/error.h"

namespace mt::test {

// What fn() threw as mt::Error, or "" when it returned.
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace mt::test
