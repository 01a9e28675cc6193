// Megatron's setup_model_and_optimizer and data set-up for a run
// (train/run_setup.h): this rank's model, optimizer, weights, schedule, data
// and log.
#include "train/run_setup.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "args/resume_options.h"
#include "backend/device.h"
#include "checkpoint/checkpoint_dir.h"
#include "kernels/matmul.h"
#include "memory/host_memory.h"
#include "observe/metrics.h"
#include "observe/precision_log.h"
#include "train/blend_cache.h"
#include "train/scheduler_resume.h"
#include "train/train_step.h"

namespace mt {

namespace {

// The weights: the checkpoint's (with its optimizer state and iteration,
// after checking the architecture matches), or the seed's initial ones.
void load_checkpoint_or_initialize(Trainer& t, const nlohmann::json& run_args, bool resume) {
  const TrainArgs& args = t.args;
  t.state.args = run_args;
  const ParamSink set_param = [&](size_t i, const float* values) {
    set_param_values(*t.rt, *t.opt, i, values);
  };
  if (resume) {
    // The architecture must match; dropout and init may change on resume, as in Megatron.
    const nlohmann::json saved_args = read_checkpoint_meta(args.load).at("args");
    check_same_architecture(saved_args.at("model"), run_args.at("model"), args.load);
    if (!args.finetune) check_training_options_on_resume(saved_args, args, args.load);
    t.state = load_checkpoint(args.load, *t.reg, set_param,
                              args.no_load_optim || args.finetune || args.skip_train
                                  ? nullptr  // --skip-train: weights only, no step follows
                                  : t.opt.get(),
                              t.ps,
                              !args.no_verify_checkpoint_checksums);
    log_line(t.ps.world_rank == 0, "loaded checkpoint from %s at iteration %lld%s\n",
             args.load.c_str(), static_cast<long long>(t.state.iteration),
             args.finetune ? "; --finetune: weights only, starting at iteration 0" : "");
    if (args.finetune) t.state = RunState{};
    t.state.args = run_args;
  } else {
    initialize_weights(*t.rt, *t.opt, args.seed);
    if (!args.load.empty())
      log_line(t.ps.world_rank == 0, "no checkpoint in %s; starting from scratch\n",
               args.load.c_str());
  }
  t.sync->refresh_params();  // optim_grads_params: the weights' pieces from the main weights
}

// The LR / weight-decay schedule (train/scheduler_resume.h): the flags', or on
// resume with the optimizer state also the checkpoint's; recorded in the
// checkpoints this run saves.
void resume_schedule(Trainer& t, bool resume) {
  const TrainArgs& args = t.args;
  const bool optim_loaded = resume && !args.no_load_optim && !args.finetune && !args.skip_train;
  const nlohmann::json saved =
      optim_loaded ? read_checkpoint_meta(args.load).at("args") : nlohmann::json();
  std::string note;
  t.schedule = resume_param_scheduler(args, optim_loaded ? &saved : nullptr, t.state, note);
  t.state.args["opt_param_scheduler"] = scheduler_record(args, t.schedule);
  if (!note.empty()) log_line(t.ps.world_rank == 0, "note: %s\n", note.c_str());
}

}  // namespace

Trainer setup_model_and_optimizer(const TrainArgs& args, const nlohmann::json& run_args,
                                  int64_t loaded_iteration, ParallelState& ps,
                                  const Timer& run_timer) {
  const bool rank0 = ps.world_rank == 0;
  const bool resume = loaded_iteration >= 0;
  Trainer t(args, ps, run_timer);
  const ModelConfig& mc = args.model;
  t.m = args.num_micro_batches();
  t.batches = args.batch_schedule();
  const int64_t m = t.m;
  const int64_t vpp = args.virtual_stages();
  t.reg = std::make_unique<ParamRegistry>(
      mc, args.stage_layout(ps.tp_rank, ps.tp_size, ps.pp_rank, ps.pp_size, ps.ep_rank));
  const int64_t in_flight = vpp > 1 ? max_in_flight_interleaved(ps.pp_size, ps.pp_rank, int(vpp), m)
                                    : max_in_flight_1f1b(ps.pp_size, ps.pp_rank, m);
  const Recompute recompute = args.recompute();
  // Planned bytes per class, known before anything is allocated: a model too
  // large for the host is refused here, with the numbers.
  MemoryPlan plan = memory_plan(
      *t.reg, args.micro_batch_size, TensorParallel{&ps.tp_comm, args.sequence_parallel}, in_flight,
      recompute, args.math_mode(), ps.dp_cp_size,
      args.shard_optimizer());
  plan.cp = ps.cp_size;
  plan.async_save = args.checks.async_save && !args.save.empty();  // its host copy
  plan.save_optim = !args.checks.no_save_optim;
  // optim_grads: the gradients in a staging pool (optim/staged_grads.h);
  // optim_grads_params: the weights too (optim/staged_params.h).
  GradPlacement grads_at = args.shard_grads() ? plan_staged_grads(*t.reg) : GradPlacement{};
  grads_at.weights = args.shard_params();
  plan.grads_staged = grads_at.floats;
  plan.params_staged = grads_at.weights ? grads_at.weight_floats : -1;
  t.predicted = predict_memory(plan);
  const Device device = parse_device(args.device);
  // (GPU runs hold the model in GPU memory: cudaMalloc's failure names the numbers.)
  t.host_line = device == Device::kCpu
                    ? check_host_memory(t.predicted.total(), ps, args.skip_memory_check)
                    : "memory: the model's classes above are in GPU memory";
  t.rt = std::make_unique<ModelRuntime>(
      *t.reg, args.micro_batch_size, TensorParallel{&ps.tp_comm, args.sequence_parallel},
      in_flight, recompute, args.math_mode(),
      ContextParallel{ps.cp_size > 1 ? &ps.cp_comm : nullptr}, device, &ps.ep_comm,
      std::move(grads_at));
  t.links = pipeline_links(ps);
  t.train_ops = training_schedule(ps.pp_size, ps.pp_rank, int(vpp), m);
  t.train_m = m;
  t.eval_ops = schedule_forward_only(ps.pp_size, ps.pp_rank, int(vpp), m);
  // Megatron's default bucket is max(40M, 1M·DP) elements (tuned for NCCL);
  // over Open MPI shared memory here 1M-element (4 MB) buckets all-reduce 1.8x
  // faster than 40M (bench/README.md), so that is the default.
  const int64_t bucket = args.ddp_bucket_size > 0 ? args.ddp_bucket_size : 1'000'000;
  // (optim_grads_params gathers each part's weights when read: blocking, so
  // --overlap-param-gather has nothing to overlap there.)
  t.sync = std::make_unique<GradSync>(
      *t.rt, ps, bucket, args.overlap_grad_reduce, args.shard_optimizer(),
      args.overlap_param_gather && !args.shard_params(), args.grad_reduce_in_bf16,
      args.shard_grads(), args.shard_params());
  // Plain AdamW, or (distributed optimizer) AdamW over this DP rank's pieces.
  // bf16: the fp32 main weights live only here (this rank's pieces with ZeRO).
  // optim_grads_params: the main weights are the weights' pieces, also in fp32.
  t.opt = std::make_unique<AdamWOptimizer>(
      *t.reg, args.optim, t.sync->optimizer_ranges(), &ps.dp_cp(),
      args.bf16 || args.shard_params(), device, &ps.edp_comm, t.sync->packed_grads(),
      args.shard_params());
  t.sync->attach(*t.opt);
  if (args.shard_grads()) {
    const bool zero3 = args.shard_params();
    log_line(rank0, "data-parallel sharding: %s: optimizer state, gradients%s sharded over %d "
             "ranks (DP x CP)%s; staged in pools of the embeddings, the loss head and the "
             "largest layer (%.1f MB of gradients)\n",
             zero3 ? "optim_grads_params (ZeRO-3)" : "optim_grads (ZeRO-2)",
             zero3 ? " and weights" : "", ps.dp_cp_size,
             mc.moe() ? (", the experts' over " + std::to_string(ps.edp_size) + " (expert DP)").c_str()
                      : "",
             double(t.rt->grad_floats()) * 4 / 1e6);
  }
  t.tokens_per_iter = args.global_batch_size * mc.seq_length;

  log_line(rank0, "megatron.cpp | %s | world %d | model: %s | %lld parameters\n",
           ps.layout().c_str(), ps.world_size, mc.summary().c_str(),
           static_cast<long long>(count_parameters(mc)));
  if (args.log_parallel_layout) log_line(rank0, "%s\n", ps.describe_groups().c_str());
  log_line(rank0, "batch: micro %lld x %lld micro-batches x DP %d = global %lld sequences of %lld\n",
           static_cast<long long>(args.micro_batch_size), static_cast<long long>(m), ps.dp_size,
           static_cast<long long>(args.global_batch_size), static_cast<long long>(mc.seq_length));
  if (t.batches.rampup.on())
    log_line(rank0, "batch ramp-up: global batch %lld, +%lld every %.1f consumed samples up to "
             "%lld, then %lld (--rampup-batch-size)\n",
             static_cast<long long>(t.batches.rampup.start),
             static_cast<long long>(t.batches.rampup.increment),
             double(t.batches.rampup.samples) /
                 double((args.global_batch_size - t.batches.rampup.start) /
                        t.batches.rampup.increment),
             static_cast<long long>(t.batches.rampup.samples),
             static_cast<long long>(args.global_batch_size));
  if (!t.batches.steps.empty()) {
    std::string steps;
    for (const BatchStep& st : t.batches.steps)
      steps += (steps.empty() ? "" : ", ") + std::to_string(st.batch) + " from sample " +
               std::to_string(st.samples);
    log_line(rank0, "batch schedule (--step-batch-size-schedule): global batch %s\n",
             steps.c_str());
  }

  load_checkpoint_or_initialize(t, run_args, resume);
  resume_schedule(t, resume);
  log_precision(args, rank0, device);
  MT_CHECK(t.state.iteration <= args.train_iters, "checkpoint is at iteration ", t.state.iteration,
           " beyond --train-iters ", args.train_iters, "; fix: raise --train-iters");
  std::error_code same_ec;
  if (resume && !args.save.empty() && std::filesystem::equivalent(args.load, args.save, same_ec))
    t.last_saved = t.state.iteration;
  return t;
}

void setup_data_and_log(Trainer& t, std::shared_ptr<const SampleDataset> program_train) {
  const TrainArgs& args = t.args;
  const bool rank0 = t.ps.world_rank == 0;
  t.data = std::make_unique<DataLoader>(args, t.ps.dp_rank, t.ps.cp_rank,
                                        blend_cache_source(args.data_cache_path, t.ps.world_comm),
                                        std::move(program_train));
  for (const std::string& note : t.data->notes()) log_line(rank0, "%s\n", note.c_str());
  // MFU against the peak of the math the GEMMs use (bf16 ~2x fp32 here; the
  // emulated fp16 runs fp32 GEMMs). On the CPU the best of 2048^3, a wide
  // 4096x2048x1024 and this model's first MLP linear (a micro-batch's rows x
  // ffn/TP x hidden), ~1 s: 2048^3 alone read 0.11-0.14 TFLOP/s on a Cascade
  // Lake where GPT-2 small then did 0.145 (MFU 111%). An achieved rate above
  // the peak still raises it, said once (reported_mfu, metrics.h).
  const MathMode peak_math = args.bf16 ? MathMode::kBF16 : MathMode::kF32;
  const bool gpu = t.rt->device() == Device::kCuda;
  MfuPeak& peak = t.log.peak;
  std::string how;
  if (args.peak_tflops > 0) {
    peak.measured = args.peak_tflops * 1e12;
    peak.source = how = "--peak-tflops";
  } else if (gpu) {
    peak.measured = measure_matmul_peak_flops_on(Device::kCuda, peak_math);
    peak.source = how = "measured at start-up, 8192^3 cuBLASLt";
  } else {
    const ModelConfig& mc = args.model;
    const int64_t ffn = mc.ffn_hidden_size > 0 ? mc.ffn_hidden_size : 4 * mc.hidden_size;
    const PeakShape linear{args.micro_batch_size * mc.seq_length / args.context_parallel_size,
                           ffn / args.tensor_model_parallel_size, mc.hidden_size};
    const PeakMeasurement m = measure_matmul_peak(matmul_peak_shapes(2048, linear), peak_math);
    peak.measured = m.flops;
    peak.source = "measured at start-up, best of " + std::to_string(m.shapes.size()) + " shapes";
    how = "measured: best of " + m.describe() +
          (peak_math == MathMode::kBF16 && matmul_bf16_native() ? ", oneDNN and VDPBF16PS"
                                                                 : ", oneDNN");
  }
  peak.flops = peak.measured;
  log_line(rank0, "peak %s matmul: %.1f GFLOP/s per rank (the MFU denominator; %s)\n",
           math_mode_name(peak_math), peak.flops / 1e9, how.c_str());
  const MemoryClasses& predicted = t.predicted;
  const MemoryReport memrep{size_t(predicted.params), size_t(predicted.grads),
                            size_t(predicted.optimizer), size_t(predicted.activations),
                            size_t(predicted.workspace), size_t(predicted.async_save)};
  log_line(rank0, "%s%s\n", memrep.line().c_str(),
           args.log_memory ? " (measured after the first step)" : "");
  log_line(rank0, "%s\n", t.host_line.c_str());
  // fp16: Megatron's loss scaler (dynamic unless --loss-scale), resumed from
  // the checkpoint when it has one.
  if (args.fp16) {
    t.scaler = args.loss_scale > 0
                   ? GradScaler::constant(args.loss_scale)
                   : GradScaler::dynamic(args.initial_loss_scale, args.min_loss_scale, 2.0, 0.5,
                                         args.loss_scale_window, args.hysteresis);
    if (!t.state.grad_scaler.is_null()) t.scaler->load_state(t.state.grad_scaler);
  }
  TrainingLog& log = t.log;
  log.json = JsonLog(args.log_json, rank0);
  log.rank0 = rank0;
  log.tty = rank0 && is_user_terminal(STDOUT_FILENO);  // no escape codes in a file
  log.train_iters = args.train_iters;
  log.log_interval = args.log_interval;
  log.start_iteration = t.state.iteration;
  log.global_batch = args.global_batch_size;
  log.tokens_per_iter = t.tokens_per_iter;
  log.flops_per_iter = flops_per_iteration(args.model, args.global_batch_size);
  log.virtual_stages = args.virtual_stages();
  log.micro_batches = t.m;
  log.rank_timers = RankTimers(args.checks);
  if (!args.save.empty())
    t.saver = std::make_unique<RunSaver>(args, t.ps, log.flops_per_iter / double(args.global_batch_size),
                                         t.state.consumed_samples, *t.reg, *t.opt);
}

}  // namespace mt
