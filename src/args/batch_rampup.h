// Megatron-LM's global batch size per iteration (its num-microbatches
// calculator, megatron/core/num_microbatches_calculator.py as of the last
// release with --rampup-batch-size, before #4411 replaced it by
// --step-batch-size-schedule): constant, or with --rampup-batch-size START
// INCR SAMPLES, RampupBatchsizeNumMicroBatchesCalculator: the batch starts at
// START and grows by INCR each SAMPLES / ((GLOBAL - START) / INCR) consumed
// samples (a float), reaching --global-batch-size once more than SAMPLES are
// consumed. The iteration's micro-batches per DP rank follow it.
// Or Megatron-LM's newer --step-batch-size-schedule "THRESHOLD:BS ..."
// (StepBatchsizeNumMicroBatchesCalculator): the batch of the last threshold
// reached, thresholds in tokens (K, M, B, T suffixes) turned into samples by
// the sequence length.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct BatchRampup {
  int64_t start = 0, increment = 0, samples = 0;  // start 0: no ramp-up
  bool on() const { return start > 0; }
};

struct BatchStep {
  int64_t samples = 0;  // from this many consumed samples on
  int64_t batch = 0;    // this global batch
};

struct BatchSchedule {
  int64_t global_batch = 1;  // after the ramp (--global-batch-size)
  int64_t micro_batch = 1;
  int64_t dp = 1;
  BatchRampup rampup;
  std::vector<BatchStep> steps;  // --step-batch-size-schedule (empty: none)

  bool varies() const { return rampup.on() || !steps.empty(); }
  // The most consumed samples at which the batch may still change.
  int64_t last_change() const;

  // Megatron's get_current_global_batch_size after `consumed_samples`.
  int64_t global_batch_at(int64_t consumed_samples) const;
  int64_t micro_batches_at(int64_t consumed_samples) const {
    return global_batch_at(consumed_samples) / (micro_batch * dp);
  }
  // Megatron's update_train_iters for --train-samples (the ramp's iterations,
  // which may pass train_samples, then whole global batches).
  int64_t iterations_for_samples(int64_t train_samples) const;
  // The samples consumed by the first `iterations` iterations.
  int64_t samples_after(int64_t iterations) const;
  // The distinct global batches of the first `iterations` iterations, in order.
  std::vector<int64_t> distinct_batches(int64_t iterations) const;
  // Megatron's refusals of the calculator's arguments (START > 0, INCR > 0,
  // SAMPLES >= 0, GLOBAL - START >= 0 and a multiple of INCR), plus a ramp of
  // no increments (Megatron divides by zero there).
  void validate() const;
};

// The values of --rampup-batch-size (empty: not given) as a BatchRampup;
// throws, naming the flag, unless there are three.
BatchRampup parse_rampup(const std::vector<int64_t>& values);

// --step-batch-size-schedule's string (empty: none) as steps in samples, as
// Megatron's _parse_schedule (commas as spaces, sorted by threshold) and
// _validate_schedule (first threshold 0, thresholds increasing, batches > 0);
// throws naming the entry.
std::vector<BatchStep> parse_step_schedule(const std::string& schedule, int64_t seq_length);

}  // namespace mt
