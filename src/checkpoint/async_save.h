// Megatron's --async-save: the checkpoint's files are written on a background
// thread while training goes on.
//
// start() copies the weights and the optimizer state into host buffers kept
// for the run (the snapshot: what the iteration's checkpoint holds, however
// the next steps change the live arrays), makes the iteration's .tmp
// directories (collective) and starts the writer. finalize() is Megatron's
// maybe_finalize_async_save: collective over the world; once every rank's
// writer is done it writes meta.json and commits the checkpoint exactly as a
// synchronous save does (the .tmp rename and the tracker written last), so a
// crash before that leaves the previous checkpoint the one resumed. A writer
// that failed on any rank fails finalize() on every rank, with that rank's
// message. The destructor only joins the writer (an error unwinding must not
// communicate).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_io.h"

namespace mt {

class AsyncCheckpointSaver {
 public:
  AsyncCheckpointSaver() = default;
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;
  ~AsyncCheckpointSaver();

  // The snapshot's host buffers, allocated and touched once at set-up
  // (`param_bytes` of weights, `optim_bytes` of optimizer state: what
  // memory/memory_report.h's async_save_copy_bytes plans); every start()
  // checks that the copy it makes is exactly that size.
  void reserve(size_t param_bytes, size_t optim_bytes);
  size_t bytes() const { return params_.size() + optim_.size(); }  // the host copy
  // Collective. No save may be pending (finalize(blocking) first). `opt`
  // null: no optimizer state (--no-save-optim).
  void start(const std::string& dir, const RunState& state, const ParamRegistry& reg,
             const SavedWeights& weights, const AdamWOptimizer* opt, const ParallelState& ps);
  bool pending() const { return pending_; }
  int64_t iteration() const { return state_.iteration; }
  // Collective (every rank calls it with the same `blocking`). Returns true
  // when the pending save was committed by this call; false when none is
  // pending or (not blocking) some rank's writer is still busy.
  bool finalize(const ParallelState& ps, bool blocking);

 private:
  std::string dir_;
  RunState state_;
  const ParamRegistry* reg_ = nullptr;
  std::vector<char> params_, optim_;  // the snapshot, reused by every save
  bool reserved_ = false;
  SaveSource source_;
  RankFiles files_;
  std::string error_;                 // the writer's failure ("" when none)
  std::atomic<bool> done_{false};
  bool pending_ = false;
  std::thread writer_;
};

}  // namespace mt
