// The run's set-up after its start-up checks (train/run_start.h): the Trainer,
// what set-up builds and the loop, the evaluation and the checkpoints share
// (train/trainer.cc), and the two steps that build it, Megatron's
// setup_model_and_optimizer and its data iterators with the log.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args/args.h"
#include "args/batch_rampup.h"
#include "checkpoint/checkpoint_io.h"
#include "comm/parallel_state.h"
#include "core/log.h"
#include "data/sample_dataset.h"
#include "memory/memory_report.h"
#include "model/model_runtime.h"
#include "model/params.h"
#include "observe/profiler.h"
#include "observe/training_log.h"
#include "optim/grad_scaler.h"
#include "optim/grad_sync.h"
#include "optim/optimizer.h"
#include "optim/param_scheduler.h"
#include "pipeline/schedules.h"
#include "train/data_loader.h"
#include "train/rerun_check.h"
#include "train/run_saver.h"
#include "train/trainer.h"

namespace mt {

// What set-up builds and the loop, the evaluation and the checkpoints share.
// The model's pieces point at each other (runtime and optimizer → registry,
// sync → runtime), so they live on the heap and a Trainer can be returned.
struct Trainer {
  Trainer(const TrainArgs& a, ParallelState& p, const Timer& t)
      : args(a), ps(p), run_timer(t), rerun(a.checks, p) {}

  const TrainArgs& args;  // validated; tokenizer and model finalized (resolve_run_args)
  ParallelState& ps;
  Timer run_timer;        // started before anything else: ETA, --exit-duration-in-mins
  int64_t m = 1;          // micro-batches per iteration on this DP rank (after any ramp-up)
  BatchSchedule batches;  // each iteration's global batch (args/batch_rampup.h)
  int64_t train_m = 0;    // the micro-batches train_ops is built for
  int64_t tokens_per_iter = 0;  // global batch x sequence length
  std::unique_ptr<ParamRegistry> reg;
  MemoryClasses predicted;  // bytes per class on this rank, planned before allocating
  std::string host_line;    // check_host_memory's verdict, printed with the plan
  std::unique_ptr<ModelRuntime> rt;
  PipelineLinks links;
  std::vector<PipeOp> train_ops, eval_ops;
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<AdamWOptimizer> opt;
  ParamScheduler schedule;  // LR (and --decoupled-lr) and weight decay per iteration
  RunState state;
  // The iteration whose complete checkpoint --save already holds: saving it
  // again (a stop on a save point) would only rewrite the same bytes.
  int64_t last_saved = -1;
  std::unique_ptr<DataLoader> data;
  std::optional<GradScaler> scaler;  // fp16 only
  TrainingLog log;
  Profiler* profiler = nullptr;  // --profile (run_training's; outlives the Trainer)
  std::unique_ptr<RunSaver> saver;  // sync or --async-save, --log-progress (train/run_saver.h)
  RerunCheck rerun;  // --rerun-mode and --check-for-spiky-loss (train/rerun_check.h)
  TrainHooks hooks;  // a library client's callbacks (train/trainer.h)
};

// Megatron's setup_model_and_optimizer: this rank's parameters, the host
// memory check, the runtime, the pipeline schedules, gradient sync and the
// optimizer, then the checkpoint's weights (or the initial ones).
Trainer setup_model_and_optimizer(const TrainArgs& args, const nlohmann::json& run_args,
                                  int64_t loaded_iteration, ParallelState& ps,
                                  const Timer& run_timer);

// Megatron's build_train_valid_test_data_iterators, then the rest of what the
// loop reads: the matmul peak (MFU), the memory plan's lines, the fp16 loss
// scaler and the log.
void setup_data_and_log(Trainer& t, std::shared_ptr<const SampleDataset> program_train);

}  // namespace mt
