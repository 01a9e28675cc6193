// Same arguments everywhere: at start-up every rank compares its parsed
// arguments (args/args_list.h) with rank 0's, before any collective that a
// mismatch could hang (a rank with another --train-iters waits forever in a
// step the others never take) and before a silent divergence (another --seed
// or --lr trains an inconsistent model).
//
// No flag may differ between ranks, not even those that look local:
// --log-interval, --eval-interval, --save-interval, --log-memory and
// --exit-interval decide when the ranks meet in collectives (logging's
// reductions, evaluation, saving), so a difference hangs; --data-path,
// --load and the tokenizer files are read by every rank and must name the
// same bytes (a node-local copy can sit at the same path on every node);
// every rank writes its shards under --save. Only --log-json (written by
// rank 0 alone), --peak-tflops and --skip-memory-check would be harmless if
// they differed, and letting them buys nothing: one launch line for every
// rank (Megatron's and torchrun's practice) keeps the rule simple to state
// and to check. Relative paths resolve against each rank's working
// directory, which this check cannot see.
//
// Protocol over the world communicator: rank 0 broadcasts the length and
// then the bytes of its serialised list; each rank compares; the lowest
// mismatching rank is agreed by an all-reduce, broadcasts its message, and
// every rank throws mt::Error with it (a mismatching rank with its own), so
// every rank ends through abort_job (MPI_Abort) within a few collectives.
#pragma once
#include <string>

#include "args/args_list.h"
#include "comm/communicator.h"

namespace mt {

// One JSON array of [flag, value] pairs; parse_arguments reads it back
// (throws mt::Error on text that is not such an array).
std::string serialize_arguments(const ArgList& args);
ArgList parse_arguments(const std::string& text);

// "" when `mine` equals `rank0`; else one line naming the first differing
// flag and both values, e.g. "rank 3 was launched with --train-iters 20 but
// rank 0 with --train-iters 10; fix: launch every rank with the same
// arguments".
std::string argument_difference(const ArgList& mine, int my_rank, const ArgList& rank0);

// The collective check above; returns when every rank of `world` runs with
// rank 0's arguments, else throws mt::Error on every rank.
void check_same_arguments(const ArgList& mine, const Communicator& world);

}  // namespace mt
