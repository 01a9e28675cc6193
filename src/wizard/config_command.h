// `megatron config` (megatron::ConfigQuestions, include/megatron/config.h):
// its flags and its run — the questions (wizard/config_prompt.h,
// config_questions.h) asked on a stream, and the file written
// (wizard/config_toml.h).
#pragma once
#include <iosfwd>

#include <CLI/CLI.hpp>

#include "megatron/config.h"

namespace mt {

// The `config` subcommand of `parent`, with its description (what `megatron
// --help` lists and `megatron config --help` prints first); no flags yet.
CLI::App* add_config_subcommand(CLI::App& parent);

// `megatron config`'s flags on `app`, bound to `a` (filled by the parse).
void add_config_flags(CLI::App& app, megatron::ConfigOptions* a);

// Asks on `out`, reads `in`, writes a.output; returns 0. Throws mt::Error
// (a refused answer with --yes / --answers, the input ended, ...).
int run_config(const megatron::ConfigOptions& a, std::istream& in, std::ostream& out);

}  // namespace mt
