// What a training run stands on, in the order it needs them: the exit signal
// handlers (first: a SIGTERM during start-up still saves and exits), MPI
// (initialised unless it is), the communication watchdog (a rank stopped during
// start-up must not hang the others), and the parallel layout of the flags over
// the world. close() (or the destructor) drops the layout, then finalises MPI
// if this session initialised it, with the watchdog still on (not while an
// exception unwinds: the error's way out, abort_job, ends MPI).
#pragma once
#include <memory>

#include "args/args.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "comm/watchdog.h"

namespace mt {

class TrainSession {
 public:
  explicit TrainSession(const TrainArgs& args);
  ~TrainSession();
  TrainSession(const TrainSession&) = delete;
  TrainSession& operator=(const TrainSession&) = delete;
  ParallelState& ps() { return *ps_; }
  void close();  // idempotent; every user of ps() is gone

 private:
  bool signals_;
  MpiEnv mpi_;
  CommWatchdog watchdog_;
  std::unique_ptr<ParallelState> ps_;
};

}  // namespace mt
