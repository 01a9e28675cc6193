// Integer flags read as argparse's int() does: decimal digits with an optional
// sign, in range. CLI11 alone reads "010" as octal 8, "0x10" as 16, and
// saturates "99999999999999999999" to INT64_MAX (strtoll without ERANGE), and
// an unsigned flag takes "-1" as 2^64 - 1: each a wrong value in silence.
#pragma once
#include <CLI/CLI.hpp>

namespace mt {

// Adds the strict check to every integer option of `app` and of its option
// groups (call after the options are defined). A bad value is a CLI11
// validation error naming the flag and the value.
void make_integer_options_strict(CLI::App& app);

}  // namespace mt
