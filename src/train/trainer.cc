#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/log.h"
#include "data/tokenizer.h"
#include "kernels/matmul.h"
#include "model/gpt.h"
#include "model/model_runtime.h"
#include "train/checkpoint_io.h"
#include "train/checkpoint_tokenizer.h"
#include "train/data_loader.h"
#include "train/host_memory.h"
#include "train/memory_report.h"
#include "train/metrics.h"
#include "train/signals.h"
#include "train/train_step.h"

namespace mt {

namespace {

// The run's tokenizer record (train/checkpoint_tokenizer.h); sets the model's
// vocabulary. Resuming without tokenizer flags adopts the checkpoint's; with
// flags, they must name the checkpoint's tokenizer (other ids would mean other
// text).
nlohmann::json resolve_tokenizer(TrainArgs& args, int64_t loaded_iteration, bool rank0) {
  nlohmann::json saved;
  std::string iter;
  if (loaded_iteration >= 0) {
    const nlohmann::json meta = read_checkpoint_meta(args.load);
    saved = meta.at("args").at("tokenizer");
    iter = checkpoint_iteration_dir(args.load, loaded_iteration);
    const bool no_flags = args.tokenizer_type.empty() && args.vocab_file.empty() &&
                          args.merge_file.empty() && args.tokenizer_model.empty() &&
                          args.vocab_size == 0;
    if (no_flags) {
      args.tokenizer_type = saved.at("type").get<std::string>();
      args.vocab_size = saved.value("vocab_size", int64_t(0));
      args.model.vocab_size = meta.at("args").at("model").at("vocab_size").get<int64_t>();
      log_line(rank0, "tokenizer: %s, as recorded in the checkpoint\n", args.tokenizer_type.c_str());
      return saved.at("type") == "char" || saved.at("type") == "NullTokenizer"
                 ? saved
                 : adopt_tokenizer_record(saved, iter);
    }
  }
  if (args.tokenizer_type.empty()) args.tokenizer_type = "char";
  TokenizerOptions o;
  o.type = args.tokenizer_type;
  o.vocab_file = args.vocab_file;
  o.merge_file = args.merge_file;
  o.tokenizer_model = args.tokenizer_model;
  o.vocab_size = args.vocab_size;
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(o);
  args.model.vocab_size = tok->vocab_size();
  nlohmann::json record = tokenizer_record(*tok, o);
  if (loaded_iteration >= 0 && !same_tokenizer(saved, record)) {
    std::string diff;
    if (saved.value("type", "") == "char" && record.value("type", "") == "char") {
      const nlohmann::json &a = saved.at("vocab"), &b = record.at("vocab");
      size_t i = 0;
      while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
      diff = " (" + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
             " entries; first difference at id " + std::to_string(i) + ": " +
             (i < a.size() ? a[i].dump() : std::string("none")) + " vs " +
             (i < b.size() ? b[i].dump() : std::string("none")) + ")";
    }
    MT_FAIL("--load ", args.load, ": the checkpoint was trained with another tokenizer (",
            saved.value("type", "?"), ") than this run's (", record.value("type", "?"), ")", diff,
            "; the ids would mean other text; fix: leave out the tokenizer flags to use the "
            "checkpoint's", saved.contains("vocab") ? "" : " (" + tokenizer_file_list(saved) +
            " in " + iter + "/tokenizer)", ", or pass the files it was trained with");
  }
  return record;
}

// Before anything is read or trained: refuse a --save that holds checkpoints
// this run did not load, repair what a crash left there, and find out now if
// it cannot be written (checkpoint_dir.h).
void prepare_save_dir(const TrainArgs& args, int64_t loaded_iteration, const ParallelState& ps) {
  if (args.save.empty()) return;
  if (ps.world_rank == 0) {
    check_save_target(args.save, args.load, loaded_iteration, args.overwrite_checkpoints);
    check_writable_dir(args.save, "0");
    for (const std::string& line : recover_checkpoint_dir(args.save))
      log_line(true, "checkpoint directory: %s\n", line.c_str());
  }
  ps.world_comm.barrier();  // the directory exists and is repaired before anyone reads it
  if (ps.world_rank != 0) check_writable_dir(args.save, std::to_string(ps.world_rank));
}

class JsonLog {
 public:
  JsonLog(const std::string& path, bool enabled) {
    if (enabled && !path.empty()) {
      out_.open(path, std::ios::app);
      MT_CHECK(out_.good(), "cannot open --log-json ", path, " for writing");
    }
  }
  void write(const nlohmann::json& j) {
    if (out_.is_open()) out_ << j.dump() << "\n" << std::flush;
  }

 private:
  std::ofstream out_;
};

}  // namespace

int run_training(TrainArgs args, ParallelState& ps) {
  Timer run_timer;
  const bool rank0 = ps.world_rank == 0;
  const bool tty = rank0 && isatty(STDOUT_FILENO);
  args.validate(ps.world_size);
  const int64_t loaded_iteration = args.load.empty() ? -1 : latest_iteration(args.load);
  const bool resume = loaded_iteration >= 0;
  prepare_save_dir(args, loaded_iteration, ps);  // first: it may restore the loaded iteration
  nlohmann::json run_args = {{"tokenizer", resolve_tokenizer(args, loaded_iteration, rank0)}};
  args.model.finalize(ps.tp_size);
  if (resume) {  // keep the checkpoint's vocabulary padding when this TP size divides it
    const int64_t saved = read_checkpoint_meta(args.load).at("args").at("model").at(
        "padded_vocab_size");
    if (saved % ps.tp_size == 0 && saved >= args.model.vocab_size)
      args.model.padded_vocab_size = saved;
  }
  run_args["model"] = model_config_to_json(args.model);
  run_args["seed"] = args.seed;
  // Which pipeline rank holds each layer, for re-sharding on load.
  std::vector<int> layer_stage(size_t(args.model.num_layers), 0);
  for (int r = 0; r < ps.pp_size; ++r)
    for (const auto& [b, e] : args.stage_layout(0, 1, r, ps.pp_size).chunk_ranges())
      for (int64_t l = b; l < e; ++l) layer_stage[size_t(l)] = r;
  run_args["layer_stage"] = layer_stage;
  install_exit_signal_handlers();

  const ModelConfig& mc = args.model;
  const int64_t m = args.num_micro_batches();
  const int64_t vpp = args.virtual_stages();
  ParamRegistry reg(mc, args.stage_layout(ps.tp_rank, ps.tp_size, ps.pp_rank, ps.pp_size));
  const int64_t in_flight = vpp > 1 ? max_in_flight_interleaved(ps.pp_size, ps.pp_rank, int(vpp), m)
                                    : max_in_flight_1f1b(ps.pp_size, ps.pp_rank, m);
  const std::string recompute_method = args.recompute_granularity == "full" ? args.recompute_method : "";
  // Planned bytes per class, known before anything is allocated: a model too
  // large for the host is refused here, with the numbers.
  const MemoryClasses predicted = predict_memory(memory_plan(
      reg, args.micro_batch_size, TensorParallel{&ps.tp_comm, args.sequence_parallel}, in_flight,
      recompute_method, args.recompute_num_layers, args.math_mode(), ps.dp_size,
      args.use_distributed_optimizer));
  const std::string host_line = check_host_memory(predicted.total(), ps, args.skip_memory_check);
  ModelRuntime rt(reg, args.micro_batch_size, TensorParallel{&ps.tp_comm, args.sequence_parallel},
                  in_flight, recompute_method,
                  args.recompute_num_layers, args.math_mode());
  const PipelineLinks links = pipeline_links(ps);
  const std::vector<PipeOp> train_ops = training_schedule(ps.pp_size, ps.pp_rank, int(vpp), m);
  const std::vector<PipeOp> eval_ops = schedule_forward_only(ps.pp_size, ps.pp_rank, int(vpp), m);
  // Megatron's default bucket is max(40M, 1M·DP) elements (tuned for NCCL);
  // over Open MPI shared memory here 1M-element (4 MB) buckets all-reduce 1.8x
  // faster than 40M (bench/README.md), so that is the default.
  const int64_t bucket = args.ddp_bucket_size > 0 ? args.ddp_bucket_size : 1'000'000;
  GradSync sync(rt, ps, bucket, args.overlap_grad_reduce, args.use_distributed_optimizer,
                args.overlap_param_gather);
  // Plain AdamW, or (distributed optimizer) AdamW over this DP rank's pieces.
  AdamWOptimizer opt(reg, args.optim, sync.optimizer_ranges(), &ps.dp_comm);
  const LrSchedule schedule = args.lr_schedule();
  const int64_t tokens_per_iter = args.global_batch_size * mc.seq_length;

  log_line(rank0, "megatron.cpp | %s | world %d | model: %s | %lld parameters\n",
           ps.layout().c_str(), ps.world_size, mc.summary().c_str(),
           static_cast<long long>(count_parameters(mc)));
  if (args.log_parallel_layout) log_line(rank0, "%s\n", ps.describe_groups().c_str());
  log_line(rank0, "batch: micro %lld x %lld micro-batches x DP %d = global %lld sequences of %lld\n",
           static_cast<long long>(args.micro_batch_size), static_cast<long long>(m), ps.dp_size,
           static_cast<long long>(args.global_batch_size), static_cast<long long>(mc.seq_length));

  RunState state;
  state.args = run_args;
  if (resume) {
    // The architecture must match; dropout and init may change on resume, as in Megatron.
    auto architecture = [](nlohmann::json j) {
      for (const char* k : {"hidden_dropout", "attention_dropout", "init_method_std"}) j.erase(k);
      return j;
    };
    const nlohmann::json saved = architecture(read_checkpoint_meta(args.load).at("args").at("model"));
    MT_CHECK(saved == architecture(run_args["model"]), "--load ", args.load,
             ": the checkpoint's model ", saved.dump(), " differs from this run's ",
             architecture(run_args["model"]).dump(),
             "; fix: pass the same model flags (or another --load)");
    state = load_checkpoint(args.load, reg, rt.params, args.no_load_optim ? nullptr : &opt, ps);
    state.args = run_args;
    log_line(rank0, "loaded checkpoint from %s at iteration %lld\n", args.load.c_str(),
             static_cast<long long>(state.iteration));
  } else {
    reg.initialize(rt.params, args.seed);
    if (!args.load.empty())
      log_line(rank0, "no checkpoint in %s; starting from scratch\n", args.load.c_str());
  }
  rt.refresh_weight_copy();  // bf16: the GEMMs' copy of the loaded or initial weights
  if (args.bf16)
    log_line(rank0, "%s\n",
             !matmul_bf16_native()
                 ? "bf16: oneDNN has no bf16 matmul on this CPU; GEMM operands are rounded to bf16 "
                   "and multiplied in fp32 (the same numbers, no speed-up)"
             : cpu_has_native_bf16()
                 ? "bf16: GEMMs on bf16 operands with fp32 accumulation (CPU has native bf16 "
                   "instructions)"
                 : "bf16: this CPU has no native bf16 instructions; oneDNN emulates the bf16 GEMMs "
                   "(correct, but slower than fp32)");
  if (args.fp16)
    log_line(rank0, "fp16: GEMM operands rounded to fp16 and multiplied in fp32 (no fast fp16 "
             "matmul on this CPU), %s loss scaling\n", args.loss_scale > 0 ? "static" : "dynamic");
  MT_CHECK(state.iteration <= args.train_iters, "checkpoint is at iteration ", state.iteration,
           " beyond --train-iters ", args.train_iters, "; fix: raise --train-iters");

  DataLoader data(args, ps.dp_rank);
  // MFU against the peak of the math the GEMMs use (bf16 ~2x fp32 here; the
  // emulated fp16 runs fp32 GEMMs).
  const MathMode peak_math = args.bf16 ? MathMode::kBF16 : MathMode::kF32;
  const double peak = args.peak_tflops > 0 ? args.peak_tflops * 1e12
                                           : measure_matmul_peak_flops(2048, peak_math);
  log_line(rank0, "peak %s matmul: %.1f GFLOP/s per rank (%s)\n", math_mode_name(peak_math),
           peak / 1e9, args.peak_tflops > 0 ? "--peak-tflops" : "measured, 2048^3 oneDNN");
  const MemoryReport memrep{size_t(predicted.params), size_t(predicted.grads),
                            size_t(predicted.optimizer), size_t(predicted.activations),
                            size_t(predicted.workspace)};
  log_line(rank0, "%s%s\n", memrep.line().c_str(),
           args.log_memory ? " (measured after the first step)" : "");
  log_line(rank0, "%s\n", host_line.c_str());
  // fp16: Megatron's loss scaler (dynamic unless --loss-scale), resumed from
  // the checkpoint when it has one.
  std::optional<GradScaler> scaler;
  if (args.fp16) {
    scaler = args.loss_scale > 0
                 ? GradScaler::constant(args.loss_scale)
                 : GradScaler::dynamic(args.initial_loss_scale, args.min_loss_scale, 2.0, 0.5,
                                       args.loss_scale_window, args.hysteresis);
    if (!state.grad_scaler.is_null()) scaler->load_state(state.grad_scaler);
  }
  JsonLog jlog(args.log_json, rank0);
  const double flops_iter = flops_per_iteration(mc, args.global_batch_size);

  auto evaluate = [&](int64_t iteration) {
    if (!data.has_valid()) return;
    sync.wait_params();  // --overlap-param-gather: the updated parameters
    PassContext ctx;
    ctx.training = false;
    ctx.seed = args.seed;
    double sum = 0, eval_wait = 0;
    for (int64_t e = 0; e < args.eval_iters; ++e)
      sum += run_pipeline_schedule(
          rt, links, eval_ops, ctx,
          [&](int64_t k, int32_t* tokens, int32_t* labels) {
            return data.valid_batch(e, k, tokens, labels).first_sample;
          },
          nullptr, &eval_wait);
    if (ps.pp_size > 1) ps.pp_comm.all_reduce_sum(&sum, 1);  // the last stage's loss
    ps.dp_comm.all_reduce_sum(&sum, 1);
    const double loss = sum / double(args.eval_iters * tokens_per_iter);
    const double ppl = std::exp(std::min(loss, 20.0));
    if (tty) std::printf("\r\033[K");
    log_line(rank0, "%svalidation at iteration %lld | lm loss: %.6E | lm loss PPL: %.6E\n",
             timestamp().c_str(), static_cast<long long>(iteration), loss, ppl);
    jlog.write({{"iteration", iteration}, {"val_loss", loss}, {"val_ppl", ppl}});
  };
  // The iteration whose complete checkpoint --save already holds: saving it
  // again (a stop on a save point) would only rewrite the same bytes.
  std::error_code same_ec;
  int64_t last_saved = resume && !args.save.empty() &&
                               std::filesystem::equivalent(args.load, args.save, same_ec)
                           ? state.iteration
                           : -1;
  auto save = [&]() {
    if (args.save.empty() || state.iteration == last_saved) return;
    Timer t;
    sync.wait_params();
    save_checkpoint(args.save, state, reg, rt.params, &opt, ps);
    last_saved = state.iteration;
    if (tty) std::printf("\r\033[K");
    log_line(rank0, "saved checkpoint at iteration %lld to %s (%.2f s)\n",
             static_cast<long long>(state.iteration), args.save.c_str(), t.seconds());
  };

  double interval_secs = 0;  // time in training steps only: evaluation and saving excluded
  double interval_wait = 0;  // time blocked on pipeline neighbours
  double interval_loss = 0;
  int64_t interval_iters = 0, interval_counted = 0, interval_skipped = 0;
  const int64_t start_iteration = state.iteration;
  bool saved_at_exit = false;
  while (state.iteration < args.train_iters) {
    const int64_t it = state.iteration + 1;
    // As Megatron, the LR schedule advances only on iterations that updated.
    const double lr = schedule.lr_at(it - 1 - state.skipped_iterations);
    Timer step_timer;
    const StepResult r =
        train_step(rt, opt, sync, ps, train_ops, it, lr, m, tokens_per_iter, args.seed,
                   [&](int64_t k, int32_t* tokens, int32_t* labels) {
                     return data.train_batch(it, k, tokens, labels).first_sample;
                   },
                   scaler ? &*scaler : nullptr);
    const double loss = r.loss, norm = r.grad_norm;
    interval_secs += step_timer.seconds();
    interval_wait += r.wait_seconds;
    state.iteration = it;
    state.consumed_samples += args.global_batch_size;
    if (scaler) state.grad_scaler = scaler->state();
    // As Megatron: the logged loss averages the iterations that updated.
    if (!r.skipped) {
      interval_loss += loss;
      ++interval_counted;
    }
    interval_skipped += r.skipped;
    state.skipped_iterations += r.skipped;
    ++interval_iters;
    if (args.log_memory && it == start_iteration + 1) {
      const MemoryClasses measured = measure_memory(rt, opt.state_buffer());
      const size_t peak_rss = peak_rss_bytes();
      log_line(rank0, "after iteration %lld, rank 0: %s", static_cast<long long>(it),
               format_memory_report(predicted, measured, peak_rss).c_str());
      // Ranks differ by pipeline stage (and TP/DP shard sizes): every rank's
      // totals in MB, predicted / measured / peak RSS.
      const float mine[3] = {float(predicted.total() / 1e6), float(measured.total() / 1e6),
                             float(double(peak_rss) / 1e6)};
      std::vector<float> all(size_t(3 * ps.world_size));
      ps.world_comm.all_gather(all.data(), mine, 3);
      nlohmann::json per_rank = nlohmann::json::array();
      std::string lines;
      for (int r = 0; r < ps.world_size; ++r) {
        const float* x = &all[size_t(3 * r)];
        per_rank.push_back({x[0], x[1], x[2]});
        char buf[128];
        std::snprintf(buf, sizeof buf, "  rank %d: total predicted %.1f MB, measured %.1f MB, "
                      "peak RSS %.1f MB\n", r, x[0], x[1], x[2]);
        lines += buf;
      }
      if (ps.world_size > 1) log_line(rank0, "memory of every rank:\n%s", lines.c_str());
      nlohmann::json mem = memory_report_json(predicted, measured, peak_rss);
      mem["per_rank_total_mb"] = per_rank;  // [predicted, measured, peak RSS] per world rank
      jlog.write({{"iteration", it}, {"memory", mem}});
    }

    if (it % args.log_interval == 0 || it == args.train_iters) {
      const double secs = interval_secs;
      const double ms = 1e3 * secs / double(interval_iters);
      const double tps = double(tokens_per_iter) * double(interval_iters) / secs;
      const double tflops = flops_iter / (ms * 1e-3) / double(ps.world_size) / 1e12;
      const double mfu = tflops * 1e12 / peak;
      const double mean_loss =
          interval_counted > 0 ? interval_loss / double(interval_counted) : loss;
      std::string fp16_part;
      if (scaler) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " | loss scale: %.1f | number of skipped iterations: %lld",
                      scaler->scale(), static_cast<long long>(interval_skipped));
        fp16_part = buf;
      }
      const double comm_ms = 1e3 * sync.comm_seconds() / double(interval_iters);
      sync.reset_timers();
      // Pipeline bubble per stage: time blocked on neighbours / step time.
      std::string bubble;
      if (ps.pp_size > 1) {
        std::vector<float> per_stage(size_t(ps.pp_size));
        const float mine = float(interval_wait / interval_secs);
        ps.pp_comm.all_gather(per_stage.data(), &mine, 1);
        char buf[32];
        bubble = " | bubble per stage:";
        for (float b : per_stage) {
          std::snprintf(buf, sizeof buf, " %.0f%%", 100.0 * b);
          bubble += buf;
        }
        std::snprintf(buf, sizeof buf, " (theory %.0f%%)",
                      100.0 * (ps.pp_size - 1) / double(vpp * m));
        bubble += buf;
      }
      const double eta = (run_timer.seconds() / double(it - start_iteration)) *
                         double(args.train_iters - it);
      if (tty) std::printf("\r\033[K");
      log_line(rank0,
               "%s iteration %8lld/%8lld | consumed samples: %10lld | elapsed time per "
               "iteration (ms): %.1f | learning rate: %.6E | lm loss: %.6E | grad norm: %.3f | "
               "tokens/s: %.0f | TFLOP/s per rank: %.3f | MFU: %.1f%% | comm ms/iter: %.1f%s%s | "
               "ETA %s\n",
               timestamp().c_str(), static_cast<long long>(it),
               static_cast<long long>(args.train_iters),
               static_cast<long long>(state.consumed_samples), ms, lr, mean_loss, norm, tps,
               tflops, 100 * mfu, comm_ms, fp16_part.c_str(), bubble.c_str(),
               human_duration(eta).c_str());
      nlohmann::json j = {{"iteration", it}, {"consumed_samples", state.consumed_samples},
                          {"loss", mean_loss}, {"lr", lr}, {"grad_norm", norm},
                          {"ms_per_iter", ms}, {"tokens_per_s", tps}, {"tflops", tflops},
                          {"mfu", mfu}, {"comm_ms_per_iter", comm_ms}};
      if (scaler) {
        j["loss_scale"] = scaler->scale();
        j["skipped_iterations"] = interval_skipped;
      }
      jlog.write(j);
      interval_secs = 0;
      interval_wait = 0;
      interval_loss = 0;
      interval_iters = interval_counted = interval_skipped = 0;
    } else if (tty) {
      const double eta = (run_timer.seconds() / double(it - start_iteration)) *
                         double(args.train_iters - it);
      std::printf("\r\033[K iteration %lld/%lld | lm loss %.4f | ETA %s",
                  static_cast<long long>(it), static_cast<long long>(args.train_iters), loss,
                  human_duration(eta).c_str());
      std::fflush(stdout);
    }
    if (args.eval_interval > 0 && it % args.eval_interval == 0 && it != args.train_iters)
      evaluate(it);
    if (args.save_interval > 0 && it % args.save_interval == 0 && it != args.train_iters) save();

    int stop = exit_signal_received() ? 1 : 0;
    if (args.exit_duration_in_mins > 0 && run_timer.seconds() / 60.0 >= args.exit_duration_in_mins)
      stop = 1;
    ps.world_comm.all_reduce_max(&stop, 1);  // every rank stops at the same iteration
    if (args.exit_interval > 0 && it % args.exit_interval == 0) stop = 1;
    if (stop && it != args.train_iters) {
      log_line(rank0, "exiting at iteration %lld as asked (signal, --exit-interval or "
               "--exit-duration-in-mins)\n", static_cast<long long>(it));
      save();
      saved_at_exit = true;
      break;
    }
  }
  sync.wait_params();  // the final parameters are complete on every rank
  if (!saved_at_exit) {
    if (data.has_valid() && args.eval_interval > 0) evaluate(state.iteration);
    if (state.iteration > start_iteration) save();
  }
  log_line(rank0, "done: %lld iterations in %s\n", static_cast<long long>(state.iteration - start_iteration),
           human_duration(run_timer.seconds()).c_str());
  return 0;
}

}  // namespace mt
