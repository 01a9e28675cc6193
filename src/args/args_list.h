// Every `megatron train` flag with its value, as one canonical list of
// (flag, value) pairs: what the ranks of one job compare at start-up
// (args/run_args_check.h) to prove they were launched alike.
//
// Values are those parsed (after --config expansion, with the defaults of
// flags not given), written canonically: integers in decimal, floating-point
// numbers as the shortest text that reads back to the same bits (so `--lr
// 1e-3` and `--lr 0.001` are equal, 0.1 stays "0.1"), switches "true" /
// "false", strings as given. The order is the --help order: model, memory,
// parallelism, optimizer, run, data, logging and checkpoints.
//
// The flags of args/flag_table.h's lists are written from those lists (the
// same the command line declares from); the other groups still by hand, in
// args_list.cc. --config is not in the list: its file is expanded into the
// flags, which are. tests/cli/same_args_test.cc fails when `megatron train
// --help` shows a flag this list lacks; tests/train/flag_table_test.cc
// checks each entry of flag_table.h's lists against it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "args/args.h"

namespace mt {

using ArgList = std::vector<std::pair<std::string, std::string>>;

// The flags and values of `a` as parsed (call before validate() derives any).
ArgList argument_list(const TrainArgs& a);

// Canonical text of a value (exposed for tests).
std::string arg_value_text(double v);
std::string arg_value_text(float v);

}  // namespace mt
