#include "train/run_saver.h"

#include <cstdio>

#include "core/log.h"
#include "memory/memory_report.h"

namespace mt {

RunSaver::RunSaver(const TrainArgs& args, const ParallelState& ps, double flops_per_sample,
                   int64_t start_samples, const ParamRegistry& reg, const AdamWOptimizer& opt)
    : args_(args),
      flops_per_sample_(flops_per_sample),
      progress_(args.save, ps.world_size, args.checks.log_progress && ps.world_rank == 0,
                flops_per_sample * double(start_samples)) {
  if (!args.checks.async_save) return;
  const int64_t weight_bytes = args.math_mode() == MathMode::kBF16 ? 2 : 4;
  const bool save_optim = !args.checks.no_save_optim;
  const double total = async_save_copy_bytes(reg.total_floats(), weight_bytes,
                                             double(opt.state_bytes()), save_optim);
  const size_t optim = save_optim ? opt.state_bytes() : 0;
  async_.reserve(size_t(total) - optim, optim);
}

void RunSaver::save(const RunState& state, const ParamRegistry& reg, const SavedWeights& params,
                    const AdamWOptimizer* opt, const ParallelState& ps, bool tty) {
  wait(ps);  // one save at a time: the previous background save first
  const AdamWOptimizer* saved_opt = args_.checks.no_save_optim ? nullptr : opt;
  const double flops = flops_per_sample_ * double(state.consumed_samples);
  const int64_t tokens = state.consumed_samples * args_.model.seq_length;
  const bool rank0 = ps.world_rank == 0;
  Timer timer;
  if (args_.checks.async_save) {
    async_timer_.reset();
    async_.start(args_.save, state, reg, params, saved_opt, ps);
    if (tty) std::printf("\r\033[K");
    log_line(rank0, "saving checkpoint at iteration %lld to %s in the background (%.2f s "
             "exposed)\n", static_cast<long long>(state.iteration), args_.save.c_str(),
             timer.seconds());
    progress_.checkpoint(state.iteration, flops, tokens, /*async=*/true);
    return;
  }
  save_checkpoint(args_.save, state, reg, params, saved_opt, ps);
  if (tty) std::printf("\r\033[K");
  log_line(rank0, "saved checkpoint at iteration %lld to %s (%.2f s)\n",
           static_cast<long long>(state.iteration), args_.save.c_str(), timer.seconds());
  progress_.checkpoint(state.iteration, flops, tokens, /*async=*/false);
}

void RunSaver::committed(const ParallelState& ps) {
  log_line(ps.world_rank == 0, "saved checkpoint at iteration %lld to %s (--async-save: "
           "committed %.2f s after it started)\n", static_cast<long long>(async_.iteration()),
           args_.save.c_str(), async_timer_.seconds());
  progress_.async_committed(async_.iteration());
}

void RunSaver::poll(const ParallelState& ps) {
  if (async_.pending() && async_.finalize(ps, /*blocking=*/false)) committed(ps);
}

void RunSaver::wait(const ParallelState& ps) {
  if (async_.pending() && async_.finalize(ps, /*blocking=*/true)) committed(ps);
}

}  // namespace mt
