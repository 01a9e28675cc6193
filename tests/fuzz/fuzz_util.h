// Shared by the fuzz targets: the readers open files by path (they mmap
// them), so each input is written to a file in a per-process directory on
// /dev/shm (tmpfs: no disk I/O) and read back through the real code path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mt::fuzz {

// <per-process temp dir>/<name>, the directory created on first use and
// removed at exit. Each libFuzzer worker (-jobs/-fork) is its own process.
std::string temp_path(const std::string& name);

// Replaces the file at `path` with bytes [data, data + size); aborts if the
// write fails (a harness problem, not a finding).
void write_file(const std::string& path, const uint8_t* data, size_t size);

// A finding that is not a crash: the reader accepted a file and then gave a
// wrong answer. Prints `what` and aborts, which libFuzzer reports as a crash.
[[noreturn]] void wrong_answer(const std::string& what);

}  // namespace mt::fuzz
