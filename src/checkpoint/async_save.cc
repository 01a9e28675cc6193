#include "checkpoint/async_save.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "backend/device.h"
#include "core/error.h"

namespace mt {

AsyncCheckpointSaver::~AsyncCheckpointSaver() {
  if (writer_.joinable()) writer_.join();
}

void AsyncCheckpointSaver::reserve(size_t param_bytes, size_t optim_bytes) {
  params_.assign(param_bytes, 0);  // touched now, not during the first save
  optim_.assign(optim_bytes, 0);
  reserved_ = true;
}

void AsyncCheckpointSaver::start(const std::string& dir, const RunState& state,
                                 const ParamRegistry& reg, const SavedWeights& weights,
                                 const AdamWOptimizer* opt, const ParallelState& ps) {
  const ReadView params = weights.values;
  MT_CHECK(!pending_, "--async-save: the save of iteration ", state_.iteration,
           " is still pending; finalize it before starting another");
  dir_ = dir;
  state_ = state;
  reg_ = &reg;
  // The snapshot: host copies of what the checkpoint holds (GPU runs: copied
  // from the device here, on the training thread).
  const size_t param_bytes = size_t(reg.total_floats()) * (params.bf16 ? 2 : 4);
  const size_t optim_bytes = opt != nullptr ? opt->state_bytes() : 0;
  MT_CHECK(!reserved_ || (param_bytes == params_.size() && optim_bytes == optim_.size()),
           "--async-save: the host copy takes ", param_bytes, " bytes of weights and ",
           optim_bytes, " of optimizer state, but ", params_.size(), " and ", optim_.size(),
           " were planned (memory/memory_report.h async_save_copy_bytes; internal error)");
  params_.resize(param_bytes);
  copy_bytes(params_.data(), params.raw(), param_bytes);
  source_ = SaveSource{};
  source_.params = params.bf16 ? ReadView(reinterpret_cast<const uint16_t*>(params_.data()))
                               : ReadView(reinterpret_cast<const float*>(params_.data()));
  source_.fp32 = host_fp32_copies(reg, weights);
  if (opt != nullptr) {
    optim_.resize(optim_bytes);
    copy_bytes(optim_.data(), opt->exp_avg(), opt->state_bytes());
    const float* base = reinterpret_cast<const float*>(optim_.data());
    source_.opt = opt;
    source_.exp_avg = base;
    source_.exp_avg_sq = base + (opt->exp_avg_sq() - opt->exp_avg());
    source_.main_params =
        opt->has_main_params() ? base + (opt->main_params() - opt->exp_avg()) : nullptr;
    source_.steps = opt->steps();
  }
  begin_save(dir, state.iteration, reg, ps);
  error_.clear();
  files_ = RankFiles{};
  done_ = false;
  pending_ = true;
  // Tests only: the writer waits this long first, so that a test can kill
  // the job while a background save is in progress.
  const char* delay = std::getenv("MT_TEST_ASYNC_SAVE_DELAY_S");
  const double delay_s = delay != nullptr ? std::atof(delay) : 0.0;
  writer_ = std::thread([this, &ps, delay_s] {
    // The writer takes the CPU time training leaves (Linux: nice per thread).
    setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), 19);
    if (delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    try {
      files_ = write_rank_files(dir_, state_.iteration, *reg_, source_, ps);
    } catch (const std::exception& e) {
      error_ = e.what();
    }
    done_ = true;
  });
}

bool AsyncCheckpointSaver::finalize(const ParallelState& ps, bool blocking) {
  if (!pending_) return false;
  if (blocking) {
    writer_.join();
  } else {
    int busy = done_ ? 0 : 1;
    ps.world_comm.all_reduce_max(&busy, 1);  // every rank commits at the same iteration
    if (busy != 0) return false;
    writer_.join();
  }
  pending_ = false;
  // The lowest rank whose writer failed tells every rank its message.
  int lowest = error_.empty() ? 0 : ps.world_size - ps.world_rank;
  ps.world_comm.all_reduce_max(&lowest, 1);
  const int failed = ps.world_size - lowest;
  if (lowest > 0) {
    if (failed == ps.world_rank) throw Error(save_failure_message(dir_, state_.iteration, error_));
    throw Error(save_failure_message(dir_, state_.iteration,
                                     "rank " + std::to_string(failed) +
                                         "'s background writer failed (--async-save; its "
                                         "message is on that rank's output)"));
  }
  finish_save(dir_, state_, *reg_, files_, ps);
  return true;
}

}  // namespace mt
