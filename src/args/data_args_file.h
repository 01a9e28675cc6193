// Megatron's --data-args-path and --per-split-data-args-path
// (get_blend_and_blend_per_split in megatron/training/utils): the data path
// arguments read from a file when the list is too long for a command line.
// --data-args-path FILE: its whitespace-separated words are --data-path's.
// --per-split-data-args-path FILE: a JSON object with the keys train, valid
// and test, each a string (split at whitespace), a list of words, or null
// (no such split): --train-data-path, --valid-data-path, --test-data-path.
#pragma once

#include "args/args.h"

namespace mt {

// Fills args' data paths from the files it names (nothing when none); throws
// mt::Error, naming the flag and file, where Megatron refuses (a file with
// the flags it replaces, an unreadable file, a missing key, another type).
void read_data_args_files(TrainArgs& args);

}  // namespace mt
