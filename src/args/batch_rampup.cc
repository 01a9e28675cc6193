#include "args/batch_rampup.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "args/args.h"

#include "core/checked_math.h"
#include "core/error.h"

namespace mt {

BatchRampup parse_rampup(const std::vector<int64_t>& values) {
  if (values.empty()) return {};
  MT_CHECK(values.size() == 3, "--rampup-batch-size takes 3 values (START INCREMENT SAMPLES, "
           "e.g. --rampup-batch-size 16 8 300000), got ", values.size());
  return {values[0], values[1], values[2]};
}

namespace {

// Megatron's _parse_numeric_value: a number with an optional K/M/B/T suffix,
// int(float(value) * multiplier).
int64_t schedule_number(std::string v, const std::string& entry) {
  for (char& c : v) c = char(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (!v.empty()) {
    const char last = v.back();
    mult = last == 'T' ? 1e12 : last == 'B' ? 1e9 : last == 'M' ? 1e6 : last == 'K' ? 1e3 : 1;
    if (mult != 1) v.pop_back();
  }
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MT_CHECK(used == v.size() && used > 0 && std::isfinite(x * mult) && x * mult < 9.2e18,
           "--step-batch-size-schedule entry \"", entry, "\": \"", v, "\" is not a number "
           "(with an optional K, M, B or T); fix: e.g. \"0:16 2.4B:320\"");
  return int64_t(x * mult);
}

}  // namespace

std::vector<BatchStep> parse_step_schedule(const std::string& schedule, int64_t seq_length) {
  std::vector<BatchStep> steps;
  if (schedule.empty()) return steps;
  std::string text = schedule;
  std::replace(text.begin(), text.end(), ',', ' ');
  std::istringstream in(text);
  for (std::string entry; in >> entry;) {
    const size_t colon = entry.find(':');
    MT_CHECK(colon != std::string::npos, "--step-batch-size-schedule entry \"", entry,
             "\" is not THRESHOLD:BATCH_SIZE; fix: e.g. \"0:16 2.4B:320\" (thresholds in tokens)");
    const int64_t tokens = schedule_number(entry.substr(0, colon), entry);
    const int64_t batch = schedule_number(entry.substr(colon + 1), entry);
    MT_CHECK(batch > 0, "--step-batch-size-schedule entry \"", entry, "\": batch size ", batch,
             " must be positive");
    steps.push_back({tokens / seq_length, batch});
  }
  MT_CHECK(!steps.empty(), "--step-batch-size-schedule \"", schedule, "\" has no entry; fix: "
           "e.g. \"0:16 2.4B:320\"");
  std::stable_sort(steps.begin(), steps.end(),
                   [](const BatchStep& a, const BatchStep& b) { return a.samples < b.samples; });
  MT_CHECK(steps[0].samples == 0, "--step-batch-size-schedule \"", schedule, "\": the first "
           "threshold must be 0, got ", steps[0].samples, " samples; fix: start with \"0:BS\"");
  for (size_t i = 1; i < steps.size(); ++i)
    MT_CHECK(steps[i].samples > steps[i - 1].samples, "--step-batch-size-schedule \"", schedule,
             "\": thresholds must be strictly increasing, got ", steps[i - 1].samples, " then ",
             steps[i].samples, " samples (thresholds are tokens over --seq-length ", seq_length,
             "); fix: thresholds at least one sequence apart");
  return steps;
}

int64_t BatchSchedule::last_change() const {
  if (!steps.empty()) return steps.back().samples - 1;
  return rampup.on() ? rampup.samples : -1;
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
  if (!steps.empty()) {
    int64_t batch = steps[0].batch;
    for (const BatchStep& st : steps)
      if (consumed_samples >= st.samples) batch = st.batch;
    return batch;
  }
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
  if (!varies()) return train_samples / global_batch;
  int64_t iterations = 0, consumed = 0;
  while (consumed <= last_change() && consumed <= train_samples) {
    consumed = checked_add(consumed, global_batch_at(consumed), "ramp-up samples");
    ++iterations;
  }
  if (train_samples > consumed)
    iterations += (train_samples - consumed) / global_batch_at(consumed);
  return iterations;
}

int64_t BatchSchedule::samples_after(int64_t iterations) const {
  int64_t consumed = 0, it = 0;
  for (; it < iterations && varies() && consumed <= last_change(); ++it)
    consumed = checked_add(consumed, global_batch_at(consumed), "samples to train");
  constexpr const char* what = "samples to train (--train-iters x --global-batch-size)";
  return checked_add(consumed, checked_mul(iterations - it, global_batch_at(consumed), what), what);
}

std::vector<int64_t> BatchSchedule::distinct_batches(int64_t iterations) const {
  std::vector<int64_t> out;
  int64_t consumed = 0;
  for (int64_t it = 0; it < iterations && (it == 0 || consumed <= last_change()); ++it) {
    const int64_t b = global_batch_at(consumed);
    if (out.empty() || out.back() != b) out.push_back(b);
    consumed += b;
  }
  if (iterations > 0 && out.back() != global_batch_at(samples_after(iterations - 1)))
    out.push_back(global_batch_at(samples_after(iterations - 1)));
  return out;
}

// TrainArgs's part, here beside the schedule it checks: every global batch
// the run reaches must split into micro-batches of every DP rank (Megatron
// checks each as it is reached, consistency_check); the interleaved schedule
// needs their count divisible by PP.
void TrainArgs::validate_batch_rampup() const {
  if (rampup_batch_size.empty() && step_batch_size_schedule.empty()) return;
  const char* flag = rampup_batch_size.empty() ? "--step-batch-size-schedule" : "--rampup-batch-size";
  const int64_t per_step = micro_batch_size * dp_size;
  const int64_t pp = pipeline_model_parallel_size;
  for (const int64_t b : batch_schedule().distinct_batches(train_iters)) {
    MT_CHECK(b % per_step == 0, flag, " reaches a global batch of ", b,
             ", not divisible by --micro-batch-size ", micro_batch_size, " x DP ", dp_size, " = ",
             per_step, " (Megatron-LM stops there); fix: batch sizes that are multiples of ",
             per_step);
    MT_CHECK(num_layers_per_virtual_pipeline_stage == 0 || (b / per_step) % pp == 0, flag,
             " reaches a global batch of ", b, ": ", b / per_step,
             " micro-batches, not divisible by PP ", pp, " as the interleaved schedule needs; "
             "fix: batch sizes that are multiples of ", per_step * pp);
  }
}

}  // namespace mt
