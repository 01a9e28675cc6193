// Does the planned memory fit the host? A model too large for RAM is otherwise
// OOM-killed tens of seconds into start-up with no message (issue 17). The
// prediction (memory/memory_report.h, within a few percent of what is measured)
// of every rank on a host is summed and compared with what the host has
// available before anything is allocated.
#pragma once
#include <cstdint>
#include <string>

#include "comm/parallel_state.h"

namespace mt {

// Bytes a new allocation can take on this host without swapping or the OOM
// killer: /proc/meminfo's MemAvailable, lowered to the cgroup's limit minus
// its usage (v2 memory.max / memory.current, v1 limit_in_bytes / usage_in_bytes)
// when a container sets one. -1 when none of these can be read.
int64_t available_host_memory_bytes();

// train's levers, the fix check_host_memory names by default.
inline constexpr const char* kTrainMemoryLevers =
    "lower --micro-batch-size, add --recompute-granularity full, --use-distributed-optimizer "
    "or --bf16, spread the model over more ranks/hosts (TP/PP), or pass --skip-memory-check to "
    "try anyway";

// Collective over the world: ranks are grouped by host name, each host's ranks'
// `predicted_bytes` are summed and compared with its available memory. Throws
// (on the host's first rank: the job ends) naming the numbers and the levers
// when they do not fit, unless `skip` (--skip-memory-check): "<who> needs X
// ... but only Y are available; fix: <levers>". Returns the line to log on
// rank 0: this host's planned total against its available memory.
std::string check_host_memory(double predicted_bytes, const ParallelState& ps, bool skip,
                              const char* who = "the run", const char* levers = kTrainMemoryLevers);

}  // namespace mt
