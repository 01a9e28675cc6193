#include "observe/tensorboard_log.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/arena.h"
#include "core/error.h"
#include "core/log.h"

namespace mt {

namespace {

// add_scalar of `tag` at the iteration and "<tag> vs samples" at the consumed
// samples, as Megatron writes most of its series.
void add_with_samples(TensorBoardWriter& w, const std::string& tag, double value, int64_t iteration,
                      int64_t consumed_samples) {
  w.add_scalar(tag, value, iteration);
  w.add_scalar(tag + " vs samples", value, consumed_samples);
}

}  // namespace

TensorBoardLog open_tensorboard_log(const TrainArgs& args, const ParallelState& ps) {
  TensorBoardLog tb;
  if (args.tensorboard_dir.empty()) return tb;
  tb.enabled = true;
  tb.interval = args.tensorboard_log_interval;
  tb.timers = args.log_timers_to_tensorboard;
  tb.throughput = args.log_throughput;
  tb.loss_scale = !args.no_log_loss_scale_to_tensorboard;
  tb.validation_ppl = args.log_validation_ppl_to_tensorboard;
  tb.memory = args.log_memory_to_tensorboard;
  tb.world_size_tag = args.log_world_size_to_tensorboard;
  const ModelConfig& mc = args.model;
  tb.load_balancing_loss = mc.moe_router_load_balancing_type == "aux_loss" ||
                           mc.moe_router_load_balancing_type == "seq_aux_loss";
  tb.z_loss = mc.moe_z_loss_coeff != 0.f;
  tb.world_size = ps.world_size;
  // The last rank opens the file; every rank learns whether it could.
  const int last = ps.world_size - 1;
  std::string refusal;
  if (ps.world_rank == last) {
    try {
      tb.writer = std::make_unique<TensorBoardWriter>(args.tensorboard_dir);
    } catch (const Error& e) {
      refusal = e.what();
    }
  }
  uint64_t n = refusal.size();
  ps.world_comm.broadcast(&n, sizeof n, last);
  if (n == 0) {
    if (tb.writer)
      log_line(true, "TensorBoard: rank %d writes %s\n", ps.world_rank, tb.writer->path().c_str());
    return tb;
  }
  refusal.resize(size_t(n));
  ps.world_comm.broadcast(refusal.data(), size_t(n), last);
  throw Error(refusal);
}

void tensorboard_iteration(TensorBoardLog& tb, const StepResult& r, int64_t iteration,
                           int64_t consumed_samples, double lr, double loss_scale,
                           const ParallelState& ps) {
  if (!tb.enabled) return;
  tb.fb_seconds += r.forward_backward_seconds;
  tb.sync_seconds += r.grads_sync_seconds;
  tb.optimizer_seconds += r.optimizer_seconds;
  ++tb.timed_iters;
  tb.mtp_correct.resize(r.mtp_correct.size(), 0.0);
  tb.mtp_total.resize(r.mtp_total.size(), 0.0);
  for (size_t d = 0; d < r.mtp_correct.size(); ++d) {
    tb.mtp_correct[d] += r.mtp_correct[d];
    tb.mtp_total[d] += r.mtp_total[d];
  }
  if (iteration % tb.interval != 0) return;
  double ms[3] = {1e3 * tb.fb_seconds / double(tb.timed_iters),
                  1e3 * tb.sync_seconds / double(tb.timed_iters),
                  1e3 * tb.optimizer_seconds / double(tb.timed_iters)};
  tb.fb_seconds = tb.sync_seconds = tb.optimizer_seconds = 0;
  tb.timed_iters = 0;
  if (tb.timers) ps.world_comm.all_reduce_max(ms, 3);  // Megatron reports the slowest rank's
  if (!tb.writer) return;
  TensorBoardWriter& w = *tb.writer;
  const int64_t it = iteration, samples = consumed_samples;
  add_with_samples(w, "learning-rate", lr, it, samples);
  add_with_samples(w, "batch-size", double(r.global_batch), it, samples);
  add_with_samples(w, "lm loss", r.loss, it, samples);
  if (tb.loss_scale) add_with_samples(w, "loss-scale", loss_scale, it, samples);
  if (tb.world_size_tag) add_with_samples(w, "world-size", double(tb.world_size), it, samples);
  if (!r.skipped) add_with_samples(w, "grad-norm", r.grad_norm, it, samples);
  if (r.num_zeros >= 0) add_with_samples(w, "num-zeros", double(r.num_zeros), it, samples);
  if (r.params_norm >= 0) add_with_samples(w, "params-norm", r.params_norm, it, samples);
  if (tb.memory && tb.measure_memory) {
    const MemoryClasses m = tb.measure_memory();
    w.add_scalar("mem-allocated-bytes", m.total(), it);
    w.add_scalar("mem-params-bytes", m.params, it);
    w.add_scalar("mem-grads-bytes", m.grads, it);
    w.add_scalar("mem-optimizer-bytes", m.optimizer, it);
    w.add_scalar("mem-activations-bytes", m.activations, it);
    w.add_scalar("mem-workspace-bytes", m.workspace, it);
    w.add_scalar("mem-peak-rss-bytes", double(peak_rss_bytes()), it);
  }
  for (size_t d = 0; d < r.mtp_losses.size(); ++d) {  // Megatron's track_mtp_metrics
    const std::string k = "mtp_" + std::to_string(d + 1);
    w.add_scalar(k + " loss", r.mtp_losses[d], it);
    w.add_scalar(k + "_acceptance_rate", 100.0 * r.mtp_correct[d] / std::max(r.mtp_total[d], 1.0),
                 it);
    w.add_scalar(k + "_cumulative_acceptance_rate",
                 100.0 * tb.mtp_correct[d] / std::max(tb.mtp_total[d], 1.0), it);
  }
  if (r.moe) {
    if (tb.load_balancing_loss) w.add_scalar("load_balancing_loss", r.load_balancing_loss, it);
    if (tb.z_loss) w.add_scalar("z_loss", r.z_loss, it);
  }
  if (tb.timers) {
    w.add_scalar("forward-backward-time", ms[0], it);
    w.add_scalar("all-grads-sync-time", ms[1], it);
    w.add_scalar("optimizer-time", ms[2], it);
  }
  w.flush();
}

void tensorboard_interval(TensorBoardLog& tb, int64_t iteration, double seconds_per_iteration,
                          double tflops_per_rank) {
  if (!tb.writer || !tb.timers) return;
  tb.writer->add_scalar("iteration-time", seconds_per_iteration, iteration);
  if (tb.throughput) tb.writer->add_scalar("throughput", tflops_per_rank, iteration);
  tb.writer->flush();
}

void tensorboard_validation(TensorBoardLog& tb, int64_t iteration, int64_t consumed_samples,
                            double loss, double ppl) {
  if (!tb.writer) return;
  add_with_samples(*tb.writer, "lm loss validation", loss, iteration, consumed_samples);
  if (tb.validation_ppl)
    add_with_samples(*tb.writer, "lm loss validation ppl", ppl, iteration, consumed_samples);
  tb.writer->flush();
}

}  // namespace mt
