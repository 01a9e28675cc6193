// Megatron's --rerun-mode (megatron/core/rerun_state_machine.py, as
// pretrain_gpt.py's loss_func and training.py's train_step drive it), on this
// build's deterministic path. The checks run after the iteration's forward
// and backward, before its optimizer step (train/train_step.h), on the
// iteration's global mean loss, which every rank holds (Megatron: each last
// stage rank's micro-batch losses, agreed with an all-reduce) — so every rank
// takes the same decision without communicating. The validation calls, in
// Megatron's order: "found NaN in local forward loss calculation" and "found
// Inf in local forward loss calculation" (fatal, with the NaN check on),
// "Spiky loss" (not fatal, with --check-for-spiky-loss).
//
// validate_results: a rejected loss (not on the first iteration a process
// runs, as in Megatron) re-runs the iteration's forward and backward from the
// same state — same weights, same batch, same dropout keys — and compares
// (tolerance 0). Not reproduced: "Possible transient error!", exit 17
// (EXIT_CODE_FAILED_ON_RESULT_VALIDATION). Reproduced: Megatron saves a
// checkpoint, exits 16 and, resumed on another GPU, re-runs the iteration
// there; reproduced again it concludes "Correct result (but possible
// Application error)" and exits 17. On the CPU no device has kernels of its
// own (another rank's CPU computes the same bits), so that second re-run is
// the first one: the conclusion is drawn at once, the checkpoint of the last
// completed iteration written (with --save) and the run exits 17. A spiky
// loss (not fatal) is re-run the same way and training continues.
//
// report_stats: every iteration's forward and backward runs twice; each
// validation call's relative difference (Megatron's _compare_floats) is
// recorded and every 2 iterations rank 0 logs Megatron's "Stats on
// computation determinism in validation calls" (QuickStats). One sample per
// call and iteration here (the global loss).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "args/run_check_args.h"
#include "comm/parallel_state.h"
#include "train/spiky_loss.h"

namespace mt {

inline constexpr int kExitFailedOnResultValidation = 17;  // EXIT_CODE_FAILED_ON_RESULT_VALIDATION

// Thrown out of the step by validate_results: the run stops with `code`
// (every rank throws it at the same iteration), after a checkpoint of the
// last completed iteration when `checkpoint`, logging `message` last.
struct RerunExit {
  int code = 0;
  bool checkpoint = false;
  std::string message;
};

// Megatron's _compare_floats: 0 when equal (NaN = NaN), infinity when one is
// NaN or Inf and the other not, else |a - b| / ((a + b) / 2).
double compare_results(double a, double b);

// Megatron's QuickStats of the relative differences of one validation call.
class DeterminismStats {
 public:
  void record(double diff);
  // "N/Z total/identical samples, rel. variability: avg= ..., p50= ..., max: ..."
  // or "Z samples, all identical".
  std::string print() const;

 private:
  std::vector<double> samples_;  // the non-zero differences
  int64_t zero_ = 0;
  double max_ = 0;
};

class RerunCheck {
 public:
  RerunCheck(const RunCheckArgs& c, const ParallelState& ps);
  bool enabled() const { return mode_ != "disabled"; }
  // --check-for-spiky-loss's state (its first 100 losses): the "Spiky loss"
  // call's here; with --rerun-mode disabled the trainer's warning uses it.
  SpikyLossCheck& spiky() { return spiky_; }
  // After iteration `iteration`'s forward and backward gave mean loss `loss`;
  // `rerun` runs them again from the same state and returns the new loss (the
  // gradients are then the re-run's). Throws RerunExit to stop the run.
  void after_forward_backward(int64_t iteration, double loss, const std::function<double()>& rerun);

 private:
  enum class Check { kNan, kInf, kSpike };
  struct Call {
    const char* message;
    bool fatal;
    Check check;
  };
  bool rejects(const Call& c, double loss);
  void validate(int64_t iteration, double loss, const std::function<double()>& rerun);
  void report_stats(int64_t iteration, double loss, const std::function<double()>& rerun);
  std::string where(int64_t iteration) const;  // "Rank R, node N, device cpu, iteration #I"

  std::string mode_;
  std::vector<Call> calls_;
  const ParallelState& ps_;
  SpikyLossCheck spiky_;
  bool first_iteration_done_ = false;
  std::map<std::string, DeterminismStats> stats_;  // by validation call, in message order
};

}  // namespace mt
