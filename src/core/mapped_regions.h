// A clear error instead of a bare "Bus error" when a memory-mapped file
// shrinks under the running job.
//
// Reading a page of a mapping beyond the file's current end raises SIGBUS:
// a dataset .bin/.idx that another process truncates or rewrites while a job
// trains on it (validated at open, shorter later) would kill the rank with
// no word of which file. Every read-only mapping registers its range here;
// the first registration installs a SIGBUS handler that, for a fault inside
// a registered range, writes one line
//   [rank R] error: <path>: read at byte B failed: the file is no longer the
//   N bytes it had when opened (truncated or rewritten while this job reads
//   it); fix: ...
// and ends the process with exit code 1 (under mpirun the launcher then
// ends the other ranks). Other faults keep the default action.
#pragma once
#include <cstddef>
#include <string>

namespace mt {

// Registers [addr, addr + len) as a mapping of `path` (up to 64 at a time;
// more are not named, not refused). Thread-safe.
void register_mapped_region(const void* addr, size_t len, const std::string& path);
// Forgets the mapping starting at addr (before munmap).
void unregister_mapped_region(const void* addr);

// The line the handler writes for a fault at byte `offset` of a mapping of
// `path` that had `size` bytes (without the trailing newline); for tests.
std::string mapped_region_fault_message(const char* path, size_t offset, size_t size);

}  // namespace mt
