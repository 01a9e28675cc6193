// What a training run writes to TensorBoard (--tensorboard-dir), under
// Megatron-LM's tags and on its rank: the last one (Megatron's
// get_tensorboard_writer), one new events file per run, step = iteration.
//
// Every --tensorboard-log-interval iterations (training_log, Megatron's):
//   lm loss, learning-rate, batch-size, grad-norm (not on fp16-skipped
//   iterations), loss-scale (1 without fp16; off with
//   --no-log-loss-scale-to-tensorboard), world-size (--log-world-size-to-tensorboard),
//   each also as "<tag> vs samples" (step = consumed samples);
//   MoE: load_balancing_loss (aux_loss / seq_aux_loss), z_loss (--moe-z-loss-coeff > 0);
//   --log-memory-to-tensorboard: this rank's measured bytes, mem-allocated-bytes
//   (their total), mem-{params,grads,optimizer,activations,workspace}-bytes and
//   mem-peak-rss-bytes;
//   --log-timers-to-tensorboard: forward-backward-time, all-grads-sync-time,
//   optimizer-time (ms per iteration since the last write, max over ranks, as
//   Megatron's timers.write).
// At every log line (--log-interval), with --log-timers-to-tensorboard:
//   iteration-time (s per iteration) and, with --log-throughput, throughput
//   (TFLOP/s per rank).
// At every evaluation (not --skip-train's): lm loss validation, and with
// --log-validation-ppl-to-tensorboard lm loss validation ppl (and their "vs samples").
// Each call's records are flushed to the file before it returns.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "args/args.h"
#include "comm/parallel_state.h"
#include "memory/memory_report.h"
#include "observe/step_result.h"
#include "observe/tensorboard_writer.h"

namespace mt {

struct TensorBoardLog {
  bool enabled = false;                       // --tensorboard-dir given (on every rank)
  std::unique_ptr<TensorBoardWriter> writer;  // the last rank's; null on the others
  // The flags (Megatron's names and defaults).
  int64_t interval = 1;  // --tensorboard-log-interval
  bool timers = false, throughput = false, loss_scale = true, validation_ppl = false,
       memory = false, world_size_tag = false, load_balancing_loss = false, z_loss = false;
  int world_size = 1;
  // This rank's measured memory classes (--log-memory-to-tensorboard).
  std::function<MemoryClasses()> measure_memory;
  // The timers since the last write: seconds summed over `timed_iters` iterations.
  double fb_seconds = 0, sync_seconds = 0, optimizer_seconds = 0;
  int64_t timed_iters = 0;
  // --mtp-num-layers: each depth's acceptance counts since the run started
  // (Megatron's cumulative rate: process-local, anew after a resume).
  std::vector<double> mtp_correct, mtp_total;
};

// Every rank calls it (after the arguments are known to agree): the last rank
// opens a new events file in --tensorboard-dir and broadcasts its verdict, so a
// directory it cannot write ends every rank with the same one line before
// training starts. Without --tensorboard-dir: disabled (the flags that depend on
// it are ignored, as Megatron does).
TensorBoardLog open_tensorboard_log(const TrainArgs& args, const ParallelState& ps);

// After each iteration (`consumed_samples` already counts it); at
// --tensorboard-log-interval, its values (above). With timers, collective over
// the world at those iterations.
void tensorboard_iteration(TensorBoardLog& tb, const StepResult& r, int64_t iteration,
                           int64_t consumed_samples, double lr, double loss_scale,
                           const ParallelState& ps);

// At each log line: iteration-time and throughput (with the flags above).
void tensorboard_interval(TensorBoardLog& tb, int64_t iteration, double seconds_per_iteration,
                          double tflops_per_rank);

// After each evaluation on the validation split.
void tensorboard_validation(TensorBoardLog& tb, int64_t iteration, int64_t consumed_samples,
                            double loss, double ppl);

}  // namespace mt
