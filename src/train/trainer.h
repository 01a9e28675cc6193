// The training loop: for each iteration, forward/backward over the
// micro-batches (gradient accumulation) → DP gradient all-reduce → global
// grad norm → NaN/Inf check → clip → AdamW step → log → eval → save → exit checks.
//
// TrainingRun holds one run in pieces (megatron::Trainer calls them one by
// one); `megatron train` is run_training: setup(), then train(), the loop of
// step(), the evaluations and saves the flags ask for, and the exit decisions.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "args/args.h"
#include "comm/parallel_state.h"
#include "data/sample_dataset.h"

namespace mt {

// What a library client (include/megatron/trainer.h) is told as the run goes,
// on every rank (the values are the same on all).
struct StepReport {
  int64_t iteration = 0;
  double loss = 0;       // mean token loss over the global batch
  double grad_norm = 0;  // before clipping
  double lr = 0;
  int world_rank = 0;    // the rank it is told on
};
struct EvalReport {
  int64_t iteration = 0;
  double loss = 0;       // mean token loss over --eval-iters batches
  bool test = false;     // the test split, else the validation split
  int world_rank = 0;
};
struct TrainHooks {
  std::function<void(const StepReport&)> on_step;  // after each iteration's log line
  std::function<void(const EvalReport&)> on_eval;  // after each evaluation
};

// Every call is collective over the world (every rank calls it, in the same
// order); errors throw mt::Error.
class TrainingRun {
 public:
  // `program_train`: the training split the program supplies (with
  // args.program_train_data; train/data_loader.h), else null.
  TrainingRun(TrainArgs args, ParallelState& ps, TrainHooks hooks = {},
              std::shared_ptr<const SampleDataset> program_train = nullptr);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // The arguments checked on every rank, the --save directory locked and
  // prepared, the model and optimizer built and loaded (--load) or
  // initialised, the data and the log opened. Once.
  void setup();
  // One iteration after setup (a batch ramp-up's change first): forward,
  // backward, gradient reduction, the optimizer step, the log line and
  // hooks.on_step. Evaluations, saves and exits by interval are train()'s.
  StepReport step();
  // The mean token loss over --eval-iters batches of the validation split (or
  // the test split), printed, logged and told to hooks.on_eval. Needs the split.
  EvalReport evaluate(bool test = false);
  bool has_valid() const;
  bool has_test() const;
  // A checkpoint of the current iteration to --save (nothing when --save
  // already holds it); with --async-save it completes before returning.
  void save();
  int64_t iteration() const;  // completed iterations (the loaded one after --load)
  const TrainArgs& args() const;  // as setup() resolved them

  // After setup(): iterations to --train-iters with the evaluations, saves and
  // exit decisions the flags ask for (or --skip-train's evaluation), the final
  // evaluation and save. Returns the process exit code (0: finished, or saved
  // and stopped on request).
  int train();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `megatron train`: TrainingRun's setup() and train().
int run_training(TrainArgs args, ParallelState& ps, const TrainHooks& hooks = {});

}  // namespace mt
