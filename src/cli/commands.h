// The subcommands of the `megatron` binary. Each registers its flags on a
// CLI11 subcommand and returns the function that runs it.
#pragma once
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>

#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "comm/watchdog.h"
#include "train/trainer.h"

namespace mt {

using Command = std::function<int()>;

// `megatron train`: its flags on `app` (add_train_flags), then a TrainSession
// and run_training.
Command add_train_command(CLI::App& app);
// `megatron train`'s flags on `app`; the function returned, called after the
// parse, gives the run's arguments (the list flags and --data-args-path
// read; throws mt::Error as the command would).
std::function<TrainArgs()> add_train_flags(CLI::App& app);

// What a training run stands on, in the order it needs them: the exit signal
// handlers (first: a SIGTERM during start-up still saves and exits), MPI
// (initialised unless it is), the communication watchdog (a rank stopped during
// start-up must not hang the others), and the parallel layout of the flags over
// the world. close() (or the destructor) drops the layout, then finalises MPI
// if this session initialised it, with the watchdog still on (not while an
// exception unwinds: the error's way out, abort_job, ends MPI).
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
Command add_generate_command(CLI::App& app);
Command add_preprocess_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
Command add_score_command(CLI::App& app);
// `megatron serve`: Megatron's and OpenAI's HTTP APIs over a checkpoint.
Command add_serve_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
// `megatron config`: questions, then a TOML file train --config and plan --config read.
Command add_config_command(CLI::App& app);

}  // namespace mt
