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

#include "megatron/data_source.h"
#include "megatron/flags.h"

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

class Trainer {
 public:
  // `flags`: the arguments after `megatron train`. Throws FlagError (FlagHelp
  // for --help).
  explicit Trainer(const std::vector<std::string>& flags);
  // Drops the run; finalises MPI if setup() initialised it (so a process
  // runs one Trainer unless it initialises MPI itself).
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Told after each iteration's log line (step() and run()) and after each
  // evaluation (evaluate() and run()'s), on every rank. Any time before the call.
  void on_step(std::function<void(const StepLog&)> callback);
  void on_eval(std::function<void(const EvalLog&)> callback);

  // Before setup(): the training samples come from `source` instead of
  // --data-path / --mock-data (which may still give the validation and test
  // splits; --train-data-path may not be given). Give every rank a source
  // serving the same samples (megatron/data_source.h).
  void set_train_data(std::shared_ptr<const DataSource> source);

  // Set-up, once, on every rank (collective over the MPI world, which it
  // initialises unless the program has): the flags checked alike on every
  // rank, the parallel layout from --tensor-model-parallel-size and the other
  // sizes, the model and optimizer on this rank's shard, the weights and
  // optimizer state of --load (a checkpoint: resumed at its iteration) or a
  // fresh initialisation from --seed, and the data.
  void setup();
  // One training iteration on every rank (collective: the layout's
  // point-to-point sends and all-reduces): forward and backward over this
  // rank's micro-batches, the gradient reductions, clipping and the optimizer
  // step; the log line and on_step. Returns what the log line shows, the same
  // on every rank. No evaluation, save or exit by --eval-interval,
  // --save-interval or --exit-interval (run() does those): the caller decides.
  // Throws std::logic_error past --train-iters (the learning-rate schedule
  // ends there) or with --skip-train.
  StepLog step();
  // The mean token loss of the current weights over --eval-iters global
  // batches of the validation split (the same batches every time), on every
  // rank (collective), printed as run()'s evaluations and told to on_eval.
  // Throws std::logic_error without a validation split (mock data and
  // --data-path have one with --eval-interval > 0 and --eval-iters > 0).
  EvalLog evaluate();
  // A checkpoint of the current iteration in --save (collective: each rank
  // writes its shard; the same format as run()'s saves, complete only when
  // the tracker file is written last), finished (also with --async-save)
  // when it returns; a later Trainer's --load resumes from it. Nothing when
  // --save already holds this iteration. Throws std::logic_error without --save.
  void save();
  // Completed iterations: --load's iteration after setup(), +1 per step().
  int64_t iteration() const;
  // The iterations the run trains to (--train-iters, or --train-samples'), after setup().
  int64_t train_iters() const;

  // `megatron train`: setup() (unless called), then steps to --train-iters
  // with the evaluations, saves and exits the flags ask for, the final
  // evaluation and save; then MPI is finalised if the Trainer initialised it
  // (no call may follow). Returns what `megatron train` exits with (0:
  // finished, or saved and stopped as asked).
  int run();

  // Misuse (setup() twice, set_train_data() after it, step() / evaluate() /
  // save() / iteration() / train_iters() before it or after run()) throws std::logic_error,
  // alike on every rank. Any other error on any rank ends the whole job (one
  // line, MPI_Abort), as the binary does: a flag's value refused at set-up, a
  // missing file, a token id out of the vocabulary.

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megatron
