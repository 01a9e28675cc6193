#include "observe/training_log.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "observe/metrics.h"

namespace mt {

JsonLog::JsonLog(const std::string& path, bool enabled) {
  if (enabled && !path.empty()) {
    out_.open(path, std::ios::app);
    MT_CHECK(out_.good(), "cannot open --log-json ", path, " for writing");
  }
}

void JsonLog::write(const nlohmann::json& j) {
  if (out_.is_open()) out_ << j.dump() << "\n" << std::flush;
}

namespace {

// " | bubble per stage: 12% 8% (theory 9%)" — per stage: time blocked on
// neighbours / step time. Collective over the pipeline group.
std::string bubble_part(const TrainingLog& log, const ParallelState& ps,
                        std::vector<float>& per_stage) {
  per_stage.resize(size_t(ps.pp_size));
  const float mine = float(log.interval_wait / log.interval_secs);
  ps.pp_comm.all_gather(per_stage.data(), &mine, 1);
  char buf[32];
  std::string bubble = " | bubble per stage:";
  for (float b : per_stage) {
    std::snprintf(buf, sizeof buf, " %.0f%%", 100.0 * b);
    bubble += buf;
  }
  std::snprintf(buf, sizeof buf, " (theory %.0f%%)",
                100.0 * (ps.pp_size - 1) / double(log.virtual_stages * log.micro_batches));
  bubble += buf;
  return bubble;
}

}  // namespace

void training_log(TrainingLog& log, const StepResult& r, double step_seconds, double lr,
                  const RunState& state, const GradScaler* scaler, GradSync& sync,
                  const ParallelState& ps, const Timer& run_timer) {
  const int64_t it = state.iteration;
  const double loss = r.loss, norm = r.grad_norm;
  log.interval_secs += step_seconds;
  log.interval_wait += r.wait_seconds;
  // As Megatron: the logged loss averages the iterations that updated.
  if (!r.skipped) {
    log.interval_loss += loss;
    ++log.interval_counted;
    log.interval_mtp.resize(r.mtp_losses.size(), 0.0);
    for (size_t d = 0; d < r.mtp_losses.size(); ++d) log.interval_mtp[d] += r.mtp_losses[d];
  }
  log.interval_skipped += r.skipped;
  log.interval_samples += r.global_batch;
  ++log.interval_iters;
  if (log.rank_timers.active()) log.rank_timers.add(r, step_seconds);
  tensorboard_iteration(log.tb, r, it, state.consumed_samples, lr, scaler ? scaler->scale() : 1.0,
                        ps);

  if (it % log.log_interval == 0 || it == log.train_iters) {
    const double secs = log.interval_secs;
    const double ms = 1e3 * secs / double(log.interval_iters);
    // The interval's mean batch over the full one (below 1 during a ramp-up).
    const double batch_share =
        double(log.interval_samples) / double(log.interval_iters * log.global_batch);
    const double tps =
        double(log.tokens_per_iter) * batch_share * double(log.interval_iters) / secs;
    const double tflops =
        log.flops_per_iter * batch_share / (ms * 1e-3) / double(ps.world_size) / 1e12;
    // Never above 1: an achieved rate above the peak raises it, said once.
    std::string raised;
    const double mfu = reported_mfu(tflops * 1e12, log.peak, &raised);
    if (!raised.empty()) {
      if (log.tty) std::printf("\r\033[K");
      log_line(log.rank0, "iteration %lld: %s\n", static_cast<long long>(it), raised.c_str());
    }
    const double mean_loss =
        log.interval_counted > 0 ? log.interval_loss / double(log.interval_counted) : loss;
    std::string fp16_part;
    // Megatron's MTPLossLoggingHelper: "mtp_<k> loss" per depth, averaged over the interval.
    std::vector<double> mtp(log.interval_mtp.size(), 0.0);
    for (size_t d = 0; d < mtp.size(); ++d) {
      mtp[d] = log.interval_counted > 0 ? log.interval_mtp[d] / double(log.interval_counted)
                                        : r.mtp_losses.at(d);
      char buf[64];
      std::snprintf(buf, sizeof buf, " | mtp_%zu loss: %.6E", d + 1, mtp[d]);
      fp16_part += buf;
    }
    if (r.moe) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " | load_balancing_loss: %.6E | z_loss: %.6E | busiest "
                    "expert: %.1f%%", r.load_balancing_loss, r.z_loss, 100 * r.busiest_share);
      fp16_part += buf;
    }
    if (r.num_zeros >= 0) fp16_part += " | num zeros: " + std::to_string(r.num_zeros);
    if (r.params_norm >= 0) {
      char buf[48];
      std::snprintf(buf, sizeof buf, " | params norm: %.3f", r.params_norm);
      fp16_part += buf;
    }
    if (scaler) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " | loss scale: %.1f | number of skipped iterations: %lld",
                    scaler->scale(), static_cast<long long>(log.interval_skipped));
      fp16_part += buf;
    }
    const double comm_ms = 1e3 * sync.comm_seconds() / double(log.interval_iters);
    const int64_t dp_bytes = sync.dp_grad_bytes() / log.interval_iters;
    // The context-parallel ring's bytes sent by this rank (point-to-point on the CP group).
    const int64_t cp_bytes = ps.cp_comm.sent_bytes() / log.interval_iters;
    ps.cp_comm.reset_sent_bytes();
    // Of comm_ms: the ring's waits on its transfers (what the blocks did not hide).
    const double cp_ms = 1e3 * ps.cp_comm.busy_seconds() / double(log.interval_iters);
    // optim_grads_params: the weight gathers per iteration, how many a
    // prefetch had started, and the time the step blocked on them.
    std::string gathers;
    double gather_exposed_ms = 0, gathers_per_iter = 0, prefetched_per_iter = 0;
    if (const StagedParams* sp = sync.staged_params()) {
      gather_exposed_ms = 1e3 * sp->exposed_seconds() / double(log.interval_iters);
      gathers_per_iter = double(sp->gathers()) / double(log.interval_iters);
      prefetched_per_iter = double(sp->prefetched()) / double(log.interval_iters);
      char buf[128];
      std::snprintf(buf, sizeof buf, " | weight gathers/iter: %.0f (%.0f prefetched), exposed "
                    "ms/iter: %.1f", gathers_per_iter, prefetched_per_iter, gather_exposed_ms);
      gathers = buf;
    }
    sync.reset_timers();
    std::vector<float> bubbles;  // per stage, also in --log-json
    const std::string bubble = ps.pp_size > 1 ? bubble_part(log, ps, bubbles) : "";
    const double eta = (run_timer.seconds() / double(it - log.start_iteration)) *
                       double(log.train_iters - it);
    if (log.tty) std::printf("\r\033[K");
    log_line(log.rank0,
             "%s iteration %8lld/%8lld | consumed samples: %10lld | elapsed time per "
             "iteration (ms): %.1f | global batch size: %5lld | learning rate: %.6E | lm loss: %.6E | grad norm: %.3f | "
             "tokens/s: %.0f | TFLOP/s per rank: %.3f | MFU: %.1f%% | comm ms/iter: %.1f%s%s%s | "
             "ETA %s\n",
             timestamp().c_str(), static_cast<long long>(it),
             static_cast<long long>(log.train_iters),
             static_cast<long long>(state.consumed_samples), ms,
             static_cast<long long>(r.global_batch), lr, mean_loss, norm, tps,
             tflops, 100 * mfu, comm_ms, gathers.c_str(), fp16_part.c_str(), bubble.c_str(),
             human_duration(eta).c_str());
    nlohmann::json j = {{"iteration", it}, {"consumed_samples", state.consumed_samples},
                        {"global_batch_size", r.global_batch},
                        {"loss", mean_loss}, {"lr", lr}, {"grad_norm", norm},
                        {"ms_per_iter", ms}, {"tokens_per_s", tps}, {"tflops", tflops},
                        {"mfu", mfu}, {"peak_tflops", log.peak.flops / 1e12},
                        {"comm_ms_per_iter", comm_ms},
                        {"dp_grad_bytes_per_iter", dp_bytes}, {"cp_bytes_per_iter", cp_bytes},
                        {"cp_comm_ms_per_iter", cp_ms}};
    if (!bubbles.empty()) j["bubble_per_stage"] = bubbles;
    if (!gathers.empty()) {
      j["weight_gathers_per_iter"] = gathers_per_iter;
      j["weight_gathers_prefetched_per_iter"] = prefetched_per_iter;
      j["weight_gather_exposed_ms_per_iter"] = gather_exposed_ms;
    }
    for (size_t d = 0; d < mtp.size(); ++d) {
      j["mtp_" + std::to_string(d + 1) + "_loss"] = mtp[d];
      // This iteration's acceptance rate in percent (Megatron's TensorBoard series).
      j["mtp_" + std::to_string(d + 1) + "_acceptance_rate"] =
          100.0 * r.mtp_correct.at(d) / std::max(r.mtp_total.at(d), 1.0);
    }
    if (r.moe) {
      j["load_balancing_loss"] = r.load_balancing_loss;
      j["z_loss"] = r.z_loss;
      j["busiest_expert_share"] = r.busiest_share;
    }
    // This iteration's loads (not averaged over the interval), a list of experts a layer.
    if (!r.expert_tokens.empty()) j["moe_expert_tokens"] = r.expert_tokens;
    if (scaler) {
      j["loss_scale"] = scaler->scale();
      j["skipped_iterations"] = log.interval_skipped;
    }
    if (r.num_zeros >= 0) j["num_zeros"] = r.num_zeros;
    if (r.params_norm >= 0) j["params_norm"] = r.params_norm;
    const std::string timers = log.rank_timers.report(ps, j);  // collective when active
    if (!timers.empty()) log_line(log.rank0, "%s\n", timers.c_str());
    log.json.write(j);
    tensorboard_interval(log.tb, it, ms * 1e-3, tflops);
    log.interval_secs = 0;
    log.interval_wait = 0;
    log.interval_loss = 0;
    log.interval_mtp.assign(log.interval_mtp.size(), 0.0);
    log.interval_iters = log.interval_counted = log.interval_skipped = 0;
    log.interval_samples = 0;
  } else if (log.tty) {
    const double eta = (run_timer.seconds() / double(it - log.start_iteration)) *
                       double(log.train_iters - it);
    std::printf("\r\033[K iteration %lld/%lld | lm loss %.4f | ETA %s",
                static_cast<long long>(it), static_cast<long long>(log.train_iters), loss,
                human_duration(eta).c_str());
    std::fflush(stdout);
  }
}

void report_memory(TrainingLog& log, const MemoryClasses& predicted,
                   const MemoryClasses& measured, const ParallelState& ps, int64_t iteration) {
  const size_t peak_rss = peak_rss_bytes();
  log_line(log.rank0, "after iteration %lld, rank 0: %s", static_cast<long long>(iteration),
           format_memory_report(predicted, measured, peak_rss).c_str());
  // Ranks differ by pipeline stage (and TP/DP shard sizes): every rank's
  // classes go to rank 0 (each rank fills its row of a zeroed table, summed),
  // which writes one --log-json record per rank.
  constexpr int kClasses = 6;  // params, grads, optimizer, activations, workspace, async save
  constexpr int kRow = 2 * kClasses + 1;  // predicted, measured, peak RSS
  std::vector<double> all(size_t(kRow * ps.world_size), 0.0);
  double* mine = &all[size_t(kRow * ps.world_rank)];
  const double pred[kClasses] = {predicted.params,    predicted.grads,     predicted.optimizer,
                                 predicted.activations, predicted.workspace, predicted.async_save};
  const double meas[kClasses] = {measured.params,    measured.grads,     measured.optimizer,
                                 measured.activations, measured.workspace, measured.async_save};
  for (int c = 0; c < kClasses; ++c) {
    mine[c] = pred[c];
    mine[kClasses + c] = meas[c];
  }
  mine[2 * kClasses] = double(peak_rss);
  ps.world_comm.all_reduce_sum(all.data(), int64_t(all.size()));
  std::string lines;
  for (int r = 0; r < ps.world_size; ++r) {
    const double* x = &all[size_t(kRow * r)];
    const MemoryClasses p{x[0], x[1], x[2], x[3], x[4], x[5]},
        m{x[6], x[7], x[8], x[9], x[10], x[11]};
    const double rss = x[2 * kClasses];
    char buf[128];
    std::snprintf(buf, sizeof buf, "  rank %d: total predicted %.1f MB, measured %.1f MB, "
                  "peak RSS %.1f MB\n", r, p.total() / 1e6, m.total() / 1e6, rss / 1e6);
    lines += buf;
    log.json.write({{"iteration", iteration},
                    {"rank", r},
                    {"memory", memory_report_json(p, m, size_t(rss))}});
  }
  if (ps.world_size > 1) log_line(log.rank0, "memory of every rank:\n%s", lines.c_str());
}

}  // namespace mt
