// Exact integer division that refuses to truncate (Megatron's divide()).
#pragma once
#include <cstdint>

#include "core/error.h"

namespace mt {

inline int64_t divide(int64_t numerator, int64_t denominator, const char* what = "value") {
  MT_CHECK(denominator > 0 && numerator % denominator == 0, what, ": ", numerator,
           " is not divisible by ", denominator);
  return numerator / denominator;
}

}  // namespace mt
