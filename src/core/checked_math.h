// Checked int64 arithmetic for sizes computed from flag values (samples =
// --train-iters x --global-batch-size, parameters = hidden x ffn x layers, ...).
// An overflow throws mt::Error naming what was computed — pass the flags in
// `what` — instead of wrapping into a negative or small size that fails, or
// silently trains on the wrong data, far away. Also: the machine's memory, for
// the "absurd but representable" sizes that would otherwise fail in an
// allocation deep inside.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace mt {

inline constexpr std::string_view kOverflowFix =
    "; fix: lower these values (the product must fit a 64-bit integer, and memory)";

// a * b, or mt::Error "<what>: a x b overflows 64-bit integers; fix: ...".
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) MT_FAIL(what, ": ", a, " x ", b, " overflows 64-bit integers", kOverflowFix);
  return r;
}

// a + b, or mt::Error naming `what`.
inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) MT_FAIL(what, ": ", a, " + ", b, " overflows 64-bit integers", kOverflowFix);
  return r;
}

// Bytes of physical memory of this machine (0 if unknown).
inline int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return int64_t(pages) * int64_t(page);
}

}  // namespace mt
