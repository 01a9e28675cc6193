#include "train/batch_rampup.h"

#include "train/args.h"

#include "core/checked_math.h"
#include "core/error.h"

namespace mt {

BatchRampup parse_rampup(const std::vector<int64_t>& values) {
  if (values.empty()) return {};
  MT_CHECK(values.size() == 3, "--rampup-batch-size takes 3 values (START INCREMENT SAMPLES, "
           "e.g. --rampup-batch-size 16 8 300000), got ", values.size());
  return {values[0], values[1], values[2]};
}

void BatchSchedule::validate() const {
  if (!rampup.on() && rampup.increment == 0 && rampup.samples == 0) return;
  const BatchRampup& r = rampup;
  MT_CHECK(r.start > 0, "--rampup-batch-size start ", r.start, " must be > 0");
  MT_CHECK(r.increment > 0, "--rampup-batch-size increment ", r.increment, " must be > 0");
  MT_CHECK(r.samples >= 0, "--rampup-batch-size samples ", r.samples, " must be >= 0");
  const int64_t diff = global_batch - r.start;
  MT_CHECK(diff >= 0, "--rampup-batch-size start ", r.start, " is above --global-batch-size ",
           global_batch, "; fix: start at most at the global batch the ramp grows to");
  MT_CHECK(diff % r.increment == 0, "--global-batch-size ", global_batch, " - ramp-up start ",
           r.start, " = ", diff, " is not divisible by the ramp-up increment ", r.increment,
           "; fix: an increment dividing ", diff);
  MT_CHECK(diff > 0, "--rampup-batch-size start ", r.start, " equals --global-batch-size ",
           global_batch, ": nothing to ramp (Megatron-LM divides by zero here); fix: drop "
           "--rampup-batch-size, or start below the global batch");
}

int64_t BatchSchedule::global_batch_at(int64_t consumed_samples) const {
  if (!rampup.on() || consumed_samples > rampup.samples) return global_batch;
  // As Megatron: samples per increment as a float, steps truncated.
  const int64_t increments = (global_batch - rampup.start) / rampup.increment;
  const double per_increment = double(rampup.samples) / double(increments);
  const int64_t steps = int64_t(double(consumed_samples) / per_increment);
  const int64_t batch = rampup.start + steps * rampup.increment;
  MT_CHECK(batch <= global_batch, "ramp-up batch ", batch, " above --global-batch-size ",
           global_batch, " (internal error)");
  return batch;
}

int64_t BatchSchedule::iterations_for_samples(int64_t train_samples) const {
  if (!rampup.on()) return train_samples / global_batch;
  int64_t iterations = 0, consumed = 0;
  while (consumed <= rampup.samples && consumed <= train_samples) {
    consumed = checked_add(consumed, global_batch_at(consumed), "ramp-up samples");
    ++iterations;
  }
  if (train_samples > consumed) iterations += (train_samples - consumed) / global_batch;
  return iterations;
}

int64_t BatchSchedule::samples_after(int64_t iterations) const {
  int64_t consumed = 0, it = 0;
  for (; it < iterations && rampup.on() && consumed <= rampup.samples; ++it)
    consumed = checked_add(consumed, global_batch_at(consumed), "samples to train");
  constexpr const char* what = "samples to train (--train-iters x --global-batch-size)";
  return checked_add(consumed, checked_mul(iterations - it, global_batch, what), what);
}

std::vector<int64_t> BatchSchedule::distinct_batches(int64_t iterations) const {
  std::vector<int64_t> out;
  int64_t consumed = 0;
  for (int64_t it = 0; it < iterations && (it == 0 || consumed <= rampup.samples); ++it) {
    const int64_t b = global_batch_at(consumed);
    if (out.empty() || out.back() != b) out.push_back(b);
    consumed += b;
  }
  if (iterations > 0 && out.back() != global_batch_at(samples_after(iterations - 1)))
    out.push_back(global_batch);
  return out;
}

// TrainArgs's part, here beside the schedule it checks: every global batch
// the run reaches must split into micro-batches of every DP rank (Megatron
// checks each as it is reached, consistency_check); the interleaved schedule
// needs their count divisible by PP.
void TrainArgs::validate_batch_rampup() const {
  if (rampup_batch_size.empty()) return;
  const int64_t per_step = micro_batch_size * dp_size;
  const int64_t pp = pipeline_model_parallel_size;
  for (const int64_t b : batch_schedule().distinct_batches(train_iters)) {
    MT_CHECK(b % per_step == 0, "--rampup-batch-size reaches a global batch of ", b,
             ", not divisible by --micro-batch-size ", micro_batch_size, " x DP ", dp_size, " = ",
             per_step, " (Megatron-LM stops there); fix: a start and increment that are "
             "multiples of ", per_step);
    MT_CHECK(num_layers_per_virtual_pipeline_stage == 0 || (b / per_step) % pp == 0,
             "--rampup-batch-size reaches a global batch of ", b, ": ", b / per_step,
             " micro-batches, not divisible by PP ", pp, " as the interleaved schedule needs; "
             "fix: a start and increment that are multiples of ", per_step * pp);
  }
}

}  // namespace mt
