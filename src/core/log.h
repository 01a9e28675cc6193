// Logging and timing. Rank-0 printing is the caller's choice (pass `enabled`).
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace mt {

// "[2026-11-22 10:00:00] " in local time.
std::string timestamp();

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// True when file descriptor `fd` is a terminal a person watches, so that a
// progress line may redraw itself with escape codes: isatty(fd), and not
// started by mpirun (Open MPI gives every rank's stdout a pseudo-terminal
// whatever mpirun's own output is, so a `mpirun ... > log` would fill the log
// with escape codes; OMPI_COMM_WORLD_SIZE is set by mpirun only, not by a
// singleton's MPI_Init). A redirected or launched run logs plain text.
bool is_user_terminal(int fd);

// This process's rank as its launcher set it (mpirun, PMIx, Slurm), before
// MPI is up; 0 without a launcher. For what is said before MPI starts (the
// command line's errors): once, by rank 0, not once per rank.
int launcher_rank();

// printf to stdout and flush, if enabled.
void log_line(bool enabled, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace mt
