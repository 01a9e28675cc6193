#include "train/train_session.h"

#include <algorithm>
#include <exception>

#include "train/signals.h"

namespace mt {

TrainSession::TrainSession(const TrainArgs& args)
    : signals_((install_exit_signal_handlers(), true)),
      watchdog_(args.distributed_timeout_minutes * 60) {
  ParallelConfig pc;
  pc.tp = args.tensor_model_parallel_size;
  pc.pp = args.pipeline_model_parallel_size;
  pc.cp = args.context_parallel_size;
  pc.ep = args.expert_model_parallel_size;
  pc.etp = std::max(1, args.expert_tensor_parallel_size);
  check_parallel_config(mpi_.world_size(), pc);
  ps_ = std::make_unique<ParallelState>(pc);
}

TrainSession::~TrainSession() {
  ps_.reset();
  if (std::uncaught_exceptions() == 0) mpi_.finalize();  // (an error's way out is abort_job)
}

void TrainSession::close() {
  ps_.reset();
  // Last: a rank frozen at the very end must not hang the others either.
  mpi_.finalize();
}

}  // namespace mt
