// Command lines of the bench/ binaries: CLI11, as `megatron` itself, so that
// `--help` prints the usage (exit 0) and a bad argument is one line naming
// it with a pointer to --help (exit 2), never an uncaught exception; an
// error while running (mt::Error: a layout that does not fit the world, ...)
// is one line through abort_job, which ends every rank.
#pragma once
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "comm/mpi_env.h"

// A number >= lo: "--tp: 0 must be a number >= 1" (CLI11's PositiveNumber
// prints the range up to DBL_MAX instead).
inline CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(s, v) && v >= double(lo)) return "";
        return s + " must be a number >= " + std::to_string(lo);
      },
      ">=" + std::to_string(lo), "AT_LEAST");
}

// Parses argv into `app`: the exit code when the program should stop now
// (0 after --help, 2 after a bad argument), else -1.
inline int parse_bench_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "error: %s; see `%s --help`\n", e.what(), app.get_name().c_str());
    return 2;
  }
  return -1;
}

// run() with every exception turned into abort_job's one line and exit 1.
template <class Run>
int run_bench(Run&& run) {
  try {
    return run();
  } catch (const mt::Error& e) {
    mt::abort_job(e.what());
  } catch (const std::exception& e) {
    mt::abort_job(std::string("unexpected error: ") + e.what());
  }
}
