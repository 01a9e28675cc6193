// megatron/trainer.h — `megatron train` as a library call.
//
// A Trainer takes the flags `megatron train` takes (Megatron-LM's names, and
// `--config FILE`), parsed and checked the same way, and runs the same loop:
// set-up (the parallel layout from --tensor-model-parallel-size and the other
// sizes over the MPI world; --load, or a fresh initialisation), iterations to
// --train-iters with evaluation (--eval-interval) and saves (--save,
// --save-interval) as the flags say. Callbacks see each step's and each
// evaluation's numbers on every rank.
//
// MPI: the run initialises MPI unless the program has, and then finalises it
// at its end (so a process runs one Trainer unless it initialises MPI itself).
// Launch several ranks with mpirun, as the binary.
//
//   megatron::register_mlp_block("gated_gelu", std::make_shared<GatedGeluMlp>());
//   megatron::Trainer trainer({"--mock-data", "--mlp-kind", "gated_gelu", ...});
//   trainer.on_step([](const megatron::StepLog& s) { std::printf("%g\n", s.loss); });
//   return trainer.run();
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace megatron {

// One training iteration, as the log line reports it (the same on every rank).
struct StepLog {
  int64_t iteration = 0;
  double loss = 0;           // mean token loss over the global batch
  double grad_norm = 0;      // before clipping
  double learning_rate = 0;
  int world_rank = 0;        // the rank this call runs on (print on 0 only, say)
};

// One evaluation (--eval-interval, the end of training, --skip-train).
struct EvalLog {
  int64_t iteration = 0;
  double loss = 0;           // mean token loss over --eval-iters batches
  bool test = false;         // the test split, else the validation split
  int world_rank = 0;
};

// Flags `megatron train` would refuse (the message names the flag and the fix;
// with --help, the usage).
struct FlagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Trainer {
 public:
  // `flags`: the arguments after `megatron train`. Throws FlagError.
  explicit Trainer(const std::vector<std::string>& flags);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void on_step(std::function<void(const StepLog&)> callback);
  void on_eval(std::function<void(const EvalLog&)> callback);

  // Sets up, trains, evaluates and saves as the flags say; returns what
  // `megatron train` exits with (0: finished, or saved and stopped as asked).
  // An error on any rank ends the whole job (one line, MPI_Abort), as the binary does.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
