#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/device.h"
#include "checkpoint/dir_lock.h"
#include "core/log.h"
#include "comm/watchdog.h"
#include "model/gpt.h"
#include "model/model_runtime.h"
#include "optim/staged_grads.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/checkpoint_tokenizer.h"
#include "train/data_loader.h"
#include "memory/memory_report.h"
#include "observe/metrics.h"
#include "observe/profiler.h"
#include "args/run_args_check.h"
#include "train/run_saver.h"
#include "train/rerun_check.h"
#include "observe/step_stats.h"
#include "train/run_record.h"
#include "train/run_setup.h"
#include "train/run_start.h"
#include "train/run_tokenizer.h"
#include "train/signals.h"
#include "train/train_step.h"
#include "observe/training_log.h"

namespace mt {

namespace {

// --device cuda: ends at once, with one line, where it cannot run (no CUDA
// build, no GPU, an old driver) or asks for what GPU runs do not have yet
// (several ranks: no NCCL communicator yet).
void check_device(const TrainArgs& args, int world_size) {
  const Device d = parse_device(args.device);
  if (d == Device::kCpu) return;
  require_device(d);
  MT_CHECK(world_size == 1, "--device cuda with ", world_size,
           " ranks: GPU runs are one process on one GPU in this build (the NCCL communicator of "
           "multi-GPU runs is not built yet); fix: launch one rank, or train with --device cpu");
}

// The memory this rank holds by class (optim_grads' gradient shard with the gradients).
MemoryClasses measured_memory(const Trainer& t) {
  const StagedGrads* staged = t.sync->staged();
  const StagedParams* params = t.sync->staged_params();
  return measure_memory(*t.rt, t.opt->state_buffer(), staged ? &staged->shard_buffer() : nullptr,
                        params ? &params->shard_buffer() : nullptr,
                        t.saver ? t.saver->host_copy_bytes() : 0.0);
}

// Megatron's evaluate_and_print_results: the mean token loss over --eval-iters
// batches of the validation split (or, with `test`, the test split), and its
// perplexity. Nothing (a loss of 0) without that split.
double evaluate_and_print_results(Trainer& t, int64_t iteration, bool test = false) {
  const TrainArgs& args = t.args;
  ParallelState& ps = t.ps;
  if (!(test ? t.data->has_test() : t.data->has_valid())) return 0;
  t.sync->wait_params();  // --overlap-param-gather: the updated parameters
  PassContext ctx;
  ctx.training = false;
  ctx.seed = args.seed;
  ctx.params_needed = t.sync->params_hook();  // optim_grads_params: gather each part
  double sum = 0, eval_wait = 0;
  for (int64_t e = 0; e < args.eval_iters; ++e)
    sum += run_pipeline_schedule(
        *t.rt, t.links, t.eval_ops, ctx,
        [&](int64_t k, MicroBatchInput& mb) {
          if (test)
            t.data->test_batch(e, k, mb);
          else
            t.data->valid_batch(e, k, mb);
        },
        nullptr, &eval_wait);
  if (ps.pp_size > 1) ps.pp_comm.all_reduce_sum(&sum, 1);  // the last stage's loss
  ps.dp_cp().all_reduce_sum(&sum, 1);  // each CP rank summed its own tokens
  // Over the tokens whose loss counts (--eod-mask-loss), as Megatron's
  // reported 'lm loss' (its sum over its count).
  const double loss = sum / double(std::max<int64_t>(t.data->eval_loss_tokens(test), 1));
  const double ppl = std::exp(std::min(loss, 20.0));
  if (t.log.tty) std::printf("\r\033[K");
  log_line(t.log.rank0, "%s%s at iteration %lld | lm loss: %.6E | lm loss PPL: %.6E\n",
           timestamp().c_str(), test ? "test" : "validation", static_cast<long long>(iteration),
           loss, ppl);
  t.log.json.write({{"iteration", iteration},
                    {test ? "test_loss" : "val_loss", loss},
                    {test ? "test_ppl" : "val_ppl", ppl}});
  // As Megatron: --skip-train's evaluations are not written to TensorBoard.
  if (!test && !args.skip_train)
    tensorboard_validation(t.log.tb, iteration, t.state.consumed_samples, loss, ppl);
  if (t.hooks.on_eval) t.hooks.on_eval(EvalReport{iteration, loss, test, ps.world_rank});
  return loss;
}

// Megatron's save_checkpoint_and_time; nothing without --save, or when --save
// already holds this iteration.
void save_checkpoint_and_time(Trainer& t) {
  if (t.args.save.empty() || t.state.iteration == t.last_saved) return;
  TimelineSpan span(t.ps.timeline(), TimelineKind::kCheckpoint, "checkpoint save");
  t.sync->wait_params();
  HostBuffer gathered;  // optim_grads_params: every weight, for the writer
  t.saver->save(t.state, *t.reg, t.sync->weights_for_save(gathered), t.opt.get(), t.ps, t.log.tty);
  t.last_saved = t.state.iteration;
}

// After train_step: --log-params-norm, --log-num-zeros-in-grad (collective)
// and --check-for-spiky-loss's warning.
void step_checks(Trainer& t, StepResult& r, int64_t it) {
  const RunCheckArgs& c = t.args.checks;
  if (c.log_num_zeros_in_grad) r.num_zeros = num_zeros_in_grad(*t.opt, *t.sync, t.ps);
  if (c.log_params_norm) r.params_norm = params_l2_norm(*t.opt, *t.sync, t.ps);
  if (c.check_for_spiky_loss && !t.rerun.enabled() && !r.skipped &&
      t.rerun.spiky().is_spike(r.loss))
    log_line(t.log.rank0, "warning: iteration %lld: unexpected result %.6E (message='Spiky "
             "loss': >= 10x the largest of the first 100 losses, %.6E)\n",
             static_cast<long long>(it), r.loss, t.rerun.spiky().max_seen());
}

// Megatron's checkpoint_and_decide_exit, after iteration `it`: the
// --save-interval checkpoint, then whether to stop — SIGTERM/SIGINT,
// --exit-duration-in-mins, --exit-interval — saving on the way out. (A NaN or
// Inf loss or grad norm never gets here: train_step stops the job before the
// update, without saving.) True: stop now.
bool checkpoint_and_decide_exit(Trainer& t, int64_t it) {
  const TrainArgs& args = t.args;
  if (args.save_interval > 0 && it % args.save_interval == 0 && it != args.train_iters)
    save_checkpoint_and_time(t);

  int stop = exit_signal_received() ? 1 : 0;
  if (args.exit_duration_in_mins > 0 && t.run_timer.seconds() / 60.0 >= args.exit_duration_in_mins)
    stop = 1;
  t.ps.world_comm.all_reduce_max(&stop, 1);  // every rank stops at the same iteration
  if (args.exit_interval > 0 && it % args.exit_interval == 0) stop = 1;
  if (stop && it != args.train_iters) {
    log_line(t.log.rank0, "exiting at iteration %lld as asked (signal, --exit-interval or "
             "--exit-duration-in-mins)\n", static_cast<long long>(it));
    save_checkpoint_and_time(t);
    return true;
  }
  return false;
}

// The communication watchdog's margin (dist/watchdog.h): once a wait that
// completed came within a third of --distributed-timeout-minutes, a slower
// healthy step could end the job; say so once per rank.
void warn_if_timeout_is_tight(const TrainArgs& args, bool& warned) {
  const double timeout = args.distributed_timeout_minutes * 60;
  if (warned || timeout <= 0) return;
  const CompletedWait w = longest_completed_wait();
  if (w.seconds * 3 <= timeout) return;
  warned = true;
  log_line(true, "warning: a healthy wait lasted %.1f s (%s), more than a third of "
           "--distributed-timeout-minutes (%.1f s); a slower step could end the job: raise "
           "--distributed-timeout-minutes\n", w.seconds, w.where.c_str(), timeout);
}

// Megatron's batch ramp-up between iterations: the schedule for the new
// number of micro-batches, after (with --save, as Megatron's train loop) a
// checkpoint of the iteration before the change.
void ramp_batch_up(Trainer& t, int64_t batch) {
  const int64_t m = batch / (t.args.micro_batch_size * t.ps.dp_size);
  if (t.state.iteration > t.log.start_iteration) {
    log_line(t.log.rank0, "ramping up batch size from %lld to %lld\n",
             static_cast<long long>(t.train_m * t.args.micro_batch_size * t.ps.dp_size),
             static_cast<long long>(batch));
    save_checkpoint_and_time(t);
  }
  t.train_ops = training_schedule(t.ps.pp_size, t.ps.pp_rank, int(t.args.virtual_stages()), m);
  t.train_m = m;
}

// One iteration of Megatron's train loop (after a batch ramp-up's change):
// the step, its checks, the state, the log line and the on_step hook, and the
// polls after it. What follows it in the loop (evaluation, checkpoint, exit
// decision) is the caller's.
StepReport step_once(Trainer& t, bool& timeout_warned) {
  const TrainArgs& args = t.args;
  RunState& state = t.state;
  const int64_t it = state.iteration + 1;
  const int64_t batch = t.batches.global_batch_at(state.consumed_samples);
  if (batch / (args.micro_batch_size * t.ps.dp_size) != t.train_m) ramp_batch_up(t, batch);
  // As Megatron, the schedule advances only on iterations that updated
  // (with a ramp-up it counts their samples).
  const StepRates rates = t.schedule.at(
      t.batches.varies() ? double(state.consumed_samples - state.skipped_samples) /
                               double(args.lr_batch())
                         : double(it - 1 - state.skipped_iterations));
  t.profiler->before_iteration(state.iteration);
  if (Timeline* tl = t.ps.timeline()) tl->set_iteration(it);
  std::optional<TimelineSpan> step_span;  // exactly what step_seconds times
  step_span.emplace(t.ps.timeline(), TimelineKind::kIteration, "iteration");
  Timer step_timer;
  StepResult r =
      train_step(*t.rt, *t.opt, *t.sync, t.ps, t.train_ops, it, rates, t.train_m,
                 t.data->train_loss_tokens(state.consumed_samples, batch), args.seed,
                 [&](int64_t k, MicroBatchInput& mb) {
                   t.data->train_batch(state.consumed_samples, batch, k, mb);
                 },
                 t.scaler ? &*t.scaler : nullptr, args.checks.check_for_nan_in_loss_and_grad,
                 args.calculate_per_token_loss, &t.rerun);
  r.global_batch = batch;
  const double step_seconds = step_timer.seconds();
  step_checks(t, r, it);
  step_span.reset();
  state.iteration = it;
  state.consumed_samples += batch;
  if (t.scaler) state.grad_scaler = t.scaler->state();
  state.skipped_iterations += r.skipped;
  if (r.skipped) state.skipped_samples += batch;
  if (args.log_memory && it == t.log.start_iteration + 1)
    report_memory(t.log, t.predicted, measured_memory(t), t.ps, it);
  training_log(t.log, r, step_seconds, rates.lr, state, t.scaler ? &*t.scaler : nullptr,
               *t.sync, t.ps, t.run_timer);
  const StepReport report{it, r.loss, r.grad_norm, rates.lr, t.ps.world_rank};
  if (t.hooks.on_step) t.hooks.on_step(report);
  warn_if_timeout_is_tight(args, timeout_warned);
  if (t.saver) t.saver->poll(t.ps);  // --async-save: commit a finished background save
  return report;
}

// Megatron's train: iterations until --train-iters, each one step, log,
// evaluation, checkpoint and exit decision. True: it stopped early as asked,
// having saved.
bool train_loop(Trainer& t, bool& timeout_warned) {
  const TrainArgs& args = t.args;
  while (t.state.iteration < args.train_iters) {
    const int64_t it = step_once(t, timeout_warned).iteration;
    if (args.eval_interval > 0 && it % args.eval_interval == 0 && it != args.train_iters)
      evaluate_and_print_results(t, it);
    const bool stop = checkpoint_and_decide_exit(t, it);
    t.profiler->after_iteration(it);  // Megatron's profile_step_end: after the save
    if (stop) return true;
  }
  return false;
}

// Megatron's --skip-train: no step; the loaded checkpoint's loss and
// perplexity on --eval-iters batches of the validation and of the test split
// (those the --split gives documents), printed and written to --log-json;
// nothing is saved.
int evaluate_only(Trainer& t) {
  MT_CHECK(t.data->has_valid() || t.data->has_test(), "--skip-train has nothing to evaluate: ",
           "--split ", t.args.split.empty() ? "969,30,1" : t.args.split, " gives the validation "
           "and test splits no documents (or no --valid-data-path / --test-data-path), or "
           "--eval-iters is ", t.args.eval_iters, "; fix: a --split with held-out weights "
           "(e.g. 969,30,1) and --eval-iters >= 1");
  evaluate_and_print_results(t, t.state.iteration);
  evaluate_and_print_results(t, t.state.iteration, /*test=*/true);
  log_line(t.ps.world_rank == 0, "done: --skip-train evaluated the checkpoint of iteration %lld "
           "in %s\n", static_cast<long long>(t.state.iteration),
           human_duration(t.run_timer.seconds()).c_str());
  return 0;
}

// The timeline's events one iteration adds on this rank, generously: per
// micro-batch and model chunk a few pipeline steps and each layer's TP
// collectives in forward and backward; the gradient buckets and the rest.
size_t timeline_events_per_iteration(const TrainArgs& args, const ParallelState& ps) {
  const int64_t chunk_steps = args.num_micro_batches() * args.virtual_stages();
  const int64_t layers = args.model.num_layers / std::max(1, ps.pp_size) + 2;
  return size_t(chunk_steps * (16 + 32 * layers) + 4096);
}

// Megatron's do_valid is false when the validation split has no documents,
// and its loop then skips every evaluation without a word. Here one line says
// so (rank 0), with the ways to get an evaluation or to silence the line.
void warn_if_validation_is_empty(const Trainer& t) {
  const TrainArgs& args = t.args;
  if (args.eval_interval <= 0 || args.eval_iters <= 0 || t.data->has_valid()) return;
  const std::string why =
      args.data_path.empty()
          ? std::string("no --valid-data-path was given")
          : "--split " + (args.split.empty() ? std::string("969,30,1") : args.split) +
                " gives the validation split no documents";
  log_line(t.ps.world_rank == 0, "warning: evaluation is off: %s, so --eval-interval %lld "
           "evaluates nothing; fix: give the validation split a weight (e.g. --split 98,2,0) or "
           "a --valid-data-path, or pass --eval-iters 0 to silence this\n", why.c_str(),
           static_cast<long long>(args.eval_interval));
}

// --rerun-mode validate_results's end: Megatron's checkpoint and exit code.
int rerun_exit(Trainer& t, const RerunExit& e) {
  if (e.checkpoint) save_checkpoint_and_time(t);
  if (t.saver) t.saver->wait(t.ps);
  log_line(t.ps.world_rank == 0, "warning: %s%s\n", e.message.c_str(),
           e.checkpoint && t.args.save.empty() ? " (no --save: none was written here)" : "");
  return e.code;
}

}  // namespace

struct TrainingRun::Impl {
  Impl(TrainArgs a, ParallelState& p, TrainHooks h, std::shared_ptr<const SampleDataset> train)
      : args(std::move(a)), ps(p), hooks(std::move(h)), program_train(std::move(train)) {}

  TrainArgs args;  // as given, then as setup() resolves them
  ParallelState& ps;
  TrainHooks hooks;
  std::shared_ptr<const SampleDataset> program_train;
  Timer run_timer;    // restarted by setup()
  DirLock save_lock;  // held until the run ends
  // Before the Trainer, so that it outlives every pending communication.
  std::unique_ptr<Profiler> profiler;
  std::optional<Trainer> t;  // after setup()
  int64_t start_iteration = 0;
  bool timeout_warned = false;

  Trainer& trainer() {
    MT_CHECK(t.has_value(), "the run is not set up (internal error: setup() first)");
    return *t;
  }
};

TrainingRun::TrainingRun(TrainArgs args, ParallelState& ps, TrainHooks hooks,
                         std::shared_ptr<const SampleDataset> program_train)
    : impl_(std::make_unique<Impl>(std::move(args), ps, std::move(hooks),
                                   std::move(program_train))) {}

TrainingRun::~TrainingRun() = default;

void TrainingRun::setup() {
  Impl& run = *impl_;
  MT_CHECK(!run.t.has_value(), "the run is set up already (internal error)");
  TrainArgs& args = run.args;
  ParallelState& ps = run.ps;
  run.run_timer.reset();
  const ArgList launched = argument_list(args);  // as parsed, before anything derives
  if (args.use_checkpoint_args) adopt_checkpoint_model(args);
  const std::string sp_warning = args.disable_sequence_parallel_without_tp();
  if (!sp_warning.empty()) log_line(ps.world_rank == 0, "warning: %s\n", sp_warning.c_str());
  args.validate(ps.world_size);
  const std::string etp_warning = args.expert_tensor_parallel_default();
  if (!etp_warning.empty()) log_line(ps.world_rank == 0, "warning: %s\n", etp_warning.c_str());
  if (!args.inert_flags.empty()) {
    std::string list;
    for (const std::string& f : args.inert_flags) list += (list.empty() ? "" : ", ") + f;
    log_line(ps.world_rank == 0, "note: accepted without effect here: %s (GPU kernel, fusion, "
             "checkpoint back-end and data-loader choices of Megatron-LM: this build runs its own "
             "kernels, writes its own re-shardable checkpoint format and maps the data "
             "in-process)\n", list.c_str());
  }
  const std::string optim_note = optimizer_args_note(args);
  if (!optim_note.empty()) log_line(ps.world_rank == 0, "note: %s\n", optim_note.c_str());
  const std::string checks_note = run_checks_note(args.checks);
  if (!checks_note.empty()) log_line(ps.world_rank == 0, "note: %s\n", checks_note.c_str());
  const std::string capacity_note = args.capacity_factor_note();
  if (!capacity_note.empty()) log_line(ps.world_rank == 0, "note: %s\n", capacity_note.c_str());
  check_device(args, ps.world_size);  // --device cuda: at once, one line, if it cannot run
  check_same_arguments(launched, ps.world_comm);  // before the first collective that could hang
  check_outputs_against_inputs(args, ps);  // before anything is created or written
  run.save_lock = lock_save_dir(args, ps);  // held until the run ends
  TensorBoardLog tensorboard = open_tensorboard_log(args, ps);  // a bad directory ends it here
  const int64_t loaded_iteration = args.load.empty() ? -1 : latest_iteration(args.load);
  MT_CHECK(!args.checks.exit_on_missing_checkpoint || args.load.empty() || loaded_iteration >= 0,
           "--exit-on-missing-checkpoint: --load ", args.load, " holds no checkpoint (no ",
           kTrackerFile, "); fix: check the path, or leave out --exit-on-missing-checkpoint to "
           "start from scratch");
  MT_CHECK(!args.skip_train || loaded_iteration >= 0, "--skip-train evaluates a checkpoint, and ",
           args.load.empty() ? std::string("no --load was given")
                             : "--load " + args.load + " holds none",
           "; fix: --load DIR of a checkpoint (a --save of megatron train or megatron convert)");
  prepare_save_dir(args, loaded_iteration, ps);  // first: it may restore the loaded iteration
  nlohmann::json run_args = resolve_run_args(args, loaded_iteration, ps);
  record_and_check_datasets(args, loaded_iteration, run_args, ps);
  install_exit_signal_handlers();

  run.profiler = std::make_unique<Profiler>(
      args.skip_train ? ProfileArgs{} : args.profile, ps, args.tensorboard_dir, args.save,
      args.train_iters, args.finetune ? 0 : std::max<int64_t>(loaded_iteration, 0),
      timeline_events_per_iteration(args, ps));
  run.t.emplace(setup_model_and_optimizer(args, run_args, loaded_iteration, ps, run.run_timer));
  Trainer& t = *run.t;
  t.profiler = run.profiler.get();
  t.hooks = run.hooks;
  setup_data_and_log(t, run.program_train);
  t.log.tb = std::move(tensorboard);
  t.log.tb.measure_memory = [&t] { return measured_memory(t); };
  if (!args.skip_train) warn_if_validation_is_empty(t);
  run.start_iteration = t.state.iteration;
}

StepReport TrainingRun::step() {
  Trainer& t = impl_->trainer();
  MT_CHECK(!t.args.skip_train, "--skip-train: no training step is taken; fix: drop --skip-train");
  MT_CHECK(t.state.iteration < t.args.train_iters, "a step after --train-iters ",
           t.args.train_iters, "; fix: raise --train-iters (the learning-rate schedule runs "
           "to it)");
  try {
    const StepReport r = step_once(t, impl_->timeout_warned);
    t.profiler->after_iteration(r.iteration);
    return r;
  } catch (const RerunExit& e) {
    rerun_exit(t, e);
    throw Error("--rerun-mode stopped the run (exit code " + std::to_string(e.code) + ")");
  }
}

EvalReport TrainingRun::evaluate(bool test) {
  Trainer& t = impl_->trainer();
  MT_CHECK(test ? t.data->has_test() : t.data->has_valid(), "nothing to evaluate: the run has no ",
           test ? "test" : "validation", " split; fix: a --split with held-out weights (e.g. "
           "98,2,0) or a --valid-data-path, and --eval-iters >= 1");
  const double loss = evaluate_and_print_results(t, t.state.iteration, test);
  return EvalReport{t.state.iteration, loss, test, t.ps.world_rank};
}

bool TrainingRun::has_valid() const { return impl_->trainer().data->has_valid(); }
bool TrainingRun::has_test() const { return impl_->trainer().data->has_test(); }

void TrainingRun::save() {
  Trainer& t = impl_->trainer();
  MT_CHECK(!t.args.save.empty(), "no checkpoint directory to save to; fix: give --save DIR");
  save_checkpoint_and_time(t);
  if (t.saver) t.saver->wait(t.ps);  // --async-save: complete on return
}

int64_t TrainingRun::iteration() const { return impl_->trainer().state.iteration; }

const TrainArgs& TrainingRun::args() const { return impl_->args; }

int TrainingRun::train() {
  Impl& run = *impl_;
  Trainer& t = run.trainer();
  const TrainArgs& args = run.args;
  ParallelState& ps = run.ps;
  if (args.skip_train) return evaluate_only(t);
  bool saved_at_exit = false;
  try {
    saved_at_exit = train_loop(t, run.timeout_warned);
  } catch (const RerunExit& e) {
    return rerun_exit(t, e);
  }
  run.profiler->finish();  // a range past the last iteration ends with training
  t.sync->wait_params();  // the final parameters are complete on every rank
  if (!saved_at_exit) {
    if (t.data->has_valid() && args.eval_interval > 0) evaluate_and_print_results(t, t.state.iteration);
    if (t.state.iteration > run.start_iteration) save_checkpoint_and_time(t);
  }
  if (t.saver) t.saver->wait(ps);  // --async-save: the exit waits for the last save
  log_line(ps.world_rank == 0, "done: %lld iterations in %s\n",
           static_cast<long long>(t.state.iteration - run.start_iteration),
           human_duration(run.run_timer.seconds()).c_str());
  return 0;
}

int run_training(TrainArgs args, ParallelState& ps, const TrainHooks& hooks) {
  TrainingRun run(std::move(args), ps, hooks);
  run.setup();
  return run.train();
}

}  // namespace mt
