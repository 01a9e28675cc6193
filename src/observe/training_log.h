// What a training run prints, as Megatron-LM's training_log: every
// --log-interval iterations one line (iteration, consumed samples, time per
// iteration, learning rate, the loss averaged over the interval, grad norm,
// throughput, MFU, gradient-sync time, fp16 loss scale, pipeline bubble, ETA;
// with --mtp-num-layers each depth's "mtp_K loss", and in JSON its acceptance rate)
// and the same numbers as one JSON object per line (--log-json; it adds
// dp_grad_bytes_per_iter, GradSync::dp_grad_bytes of rank 0, and
// cp_bytes_per_iter, the bytes rank 0 sent on the CP group: the ring
// attention's K|V and dK|dV, evaluations' forward passes included, and
// cp_comm_ms_per_iter, the part of comm_ms_per_iter the ring spent waiting
// on them); with
// --log-memory, the memory report after the first step (report_memory).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "comm/parallel_state.h"
#include "optim/grad_scaler.h"
#include "checkpoint/checkpoint_io.h"
#include "optim/grad_sync.h"
#include "memory/memory_report.h"
#include "observe/metrics.h"
#include "observe/rank_timers.h"
#include "observe/tensorboard_log.h"
#include "observe/step_result.h"

namespace mt {

// --log-json: one JSON object per line, appended (a resumed run continues the
// file). Writes nothing when not enabled (ranks other than 0) or no path.
class JsonLog {
 public:
  JsonLog() = default;
  JsonLog(const std::string& path, bool enabled);
  void write(const nlohmann::json& j);

 private:
  std::ofstream out_;
};

// The log's state: what set-up fixes, and the sums over the iterations since
// the last line (training_log adds each iteration and resets them).
struct TrainingLog {
  // Fixed at set-up.
  bool rank0 = false;
  bool tty = false;               // rank 0 on a terminal: a progress line between log lines
  int64_t train_iters = 0;
  int64_t log_interval = 1;
  int64_t start_iteration = 0;    // the loaded iteration (ETA counts the steps since)
  int64_t global_batch = 0;       // after any ramp-up; an iteration's is StepResult's
  int64_t tokens_per_iter = 0;    // global batch x sequence length
  double flops_per_iter = 0;      // the whole model over the global batch (metrics.h)
  MfuPeak peak;                    // per rank, of the math the GEMMs use (MFU; metrics.h)
  int64_t virtual_stages = 1;     // with micro_batches: the bubble's theory
  int64_t micro_batches = 1;
  JsonLog json;
  TensorBoardLog tb;  // --tensorboard-dir (observe/tensorboard_log.h)
  RankTimers rank_timers;  // --timing-log-level, --log-straggler (observe/rank_timers.h)

  // Since the last line.
  double interval_secs = 0;  // time in training steps only: evaluation and saving excluded
  double interval_wait = 0;  // time blocked on pipeline neighbours
  double interval_loss = 0;
  std::vector<double> interval_mtp;  // --mtp-num-layers: each depth's loss, summed
  int64_t interval_iters = 0, interval_counted = 0, interval_skipped = 0;
  int64_t interval_samples = 0;  // the iterations' global batches (a ramp-up changes them)
};

// Called after every iteration (`state` already counts it; `step_seconds`:
// its train_step). Adds it to the interval; every --log-interval iterations
// and at the last, prints the line and writes the JSON record (collective
// over the pipeline group with PP > 1, for the bubble per stage) and resets
// the interval and sync's communication timers; otherwise, on a terminal, a
// progress line.
void training_log(TrainingLog& log, const StepResult& r, double step_seconds, double lr,
                  const RunState& state, const GradScaler* scaler, GradSync& sync,
                  const ParallelState& ps, const Timer& run_timer);

// With --tensorboard-dir, the same iterations' values go to TensorBoard
// (tensorboard_iteration, tensorboard_interval).
//
// --log-memory, after the first step: rank 0's predicted and measured memory
// by class with its peak RSS, then every rank's totals (collective over the
// world).
void report_memory(TrainingLog& log, const MemoryClasses& predicted,
                   const MemoryClasses& measured, const ParallelState& ps, int64_t iteration);

}  // namespace mt
