#include "args/args_list.h"

#include <charconv>
#include <type_traits>

#include "args/inert_flags.h"

namespace mt {

namespace {

template <class Float>
std::string float_text(Float v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round trip
  return std::string(buf, r.ptr);
}

struct ListBuilder {
  ArgList out;
  template <class T>
  void add(const char* flag, const T& v) {
    std::string name(flag);
    name = name.substr(0, name.find(','));  // "--norm-epsilon,--layernorm-epsilon": the first
    if constexpr (std::is_same_v<T, bool>)
      out.emplace_back(name, v ? "true" : "false");
    else if constexpr (std::is_floating_point_v<T>)
      out.emplace_back(name, float_text(v));
    else if constexpr (std::is_integral_v<T>)
      out.emplace_back(name, std::to_string(v));
    else
      out.emplace_back(name, std::string(v));
  }
};

// A list flag's words, space-separated (a word holding a space is quoted).
std::string words_text(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words)
    out += (out.empty() ? "" : " ") + (w.find(' ') == std::string::npos ? w : "'" + w + "'");
  return out;
}

std::vector<std::string> ints_text(const std::vector<int64_t>& v) {
  std::vector<std::string> out;
  for (const int64_t x : v) out.push_back(std::to_string(x));
  return out;
}

}  // namespace

std::string arg_value_text(double v) { return float_text(v); }
std::string arg_value_text(float v) { return float_text(v); }

ArgList argument_list(const TrainArgs& a) {
  ListBuilder b;
  for_each_model_field(a.model, [&](const char*, const char* flag, const char*, const auto& f) {
    if (*flag != '\0') b.add(flag, f);
  });
  b.add("--use-checkpoint-args", a.use_checkpoint_args);
  b.add("--attention-softmax-in-fp32", a.attention_softmax_in_fp32);

  b.add("--data-args-path", a.data_args_path);
  b.add("--per-split-data-args-path", a.per_split_data_args_path);
  b.add("--rampup-batch-size", words_text(ints_text(a.rampup_batch_size)));
  b.add("--step-batch-size-schedule", a.step_batch_size_schedule);
  b.add("--recompute-activations", a.recompute_activations);
  b.add("--recompute-granularity", a.recompute_granularity);
  b.add("--recompute-method", a.recompute_method);
  b.add("--recompute-num-layers", a.recompute_num_layers);
  b.add("--recompute-modules", words_text(a.recompute_modules));
  b.add("--moe-layer-recompute", a.moe_layer_recompute);
  b.add("--use-distributed-optimizer", a.use_distributed_optimizer);
  b.add("--overlap-param-gather", a.overlap_param_gather);
  b.add("--use-megatron-fsdp", a.use_megatron_fsdp);
  b.add("--data-parallel-sharding-strategy", a.data_parallel_sharding_strategy);
  b.add("--bf16", a.bf16);
  b.add("--accumulate-allreduce-grads-in-fp32", a.accumulate_allreduce_grads_in_fp32);
  b.add("--grad-reduce-in-bf16", a.grad_reduce_in_bf16);
  b.add("--fp16", a.fp16);
  b.add("--loss-scale", a.loss_scale);
  b.add("--initial-loss-scale", a.initial_loss_scale);
  b.add("--min-loss-scale", a.min_loss_scale);
  b.add("--loss-scale-window", a.loss_scale_window);
  b.add("--hysteresis", a.hysteresis);
  b.add("--skip-memory-check", a.skip_memory_check);
  b.add("--log-memory", a.log_memory);

  b.add("--tensor-model-parallel-size", a.tensor_model_parallel_size);
  b.add("--pipeline-model-parallel-size", a.pipeline_model_parallel_size);
  b.add("--context-parallel-size", a.context_parallel_size);
  b.add("--expert-model-parallel-size", a.expert_model_parallel_size);
  b.add("--expert-tensor-parallel-size", a.expert_tensor_parallel_size);
  b.add("--num-layers-per-virtual-pipeline-stage", a.num_layers_per_virtual_pipeline_stage);
  b.add("--decoder-first-pipeline-num-layers", a.decoder_first_pipeline_num_layers);
  b.add("--decoder-last-pipeline-num-layers", a.decoder_last_pipeline_num_layers);
  b.add("--account-for-embedding-in-pipeline-split", a.account_for_embedding_in_pipeline_split);
  b.add("--account-for-loss-in-pipeline-split", a.account_for_loss_in_pipeline_split);
  b.add("--sequence-parallel", a.sequence_parallel);
  b.add("--overlap-grad-reduce", a.overlap_grad_reduce);
  b.add("--ddp-bucket-size", a.ddp_bucket_size);
  b.add("--log-parallel-layout", a.log_parallel_layout);
  b.add("--distributed-timeout-minutes", a.distributed_timeout_minutes);

  b.add("--lr", a.lr);
  b.add("--min-lr", a.min_lr);
  b.add("--lr-warmup-iters", a.lr_warmup_iters);
  b.add("--lr-warmup-fraction", a.lr_warmup_fraction);
  b.add("--lr-decay-iters", a.lr_decay_iters);
  b.add("--lr-decay-style", a.lr_decay_style);
  b.add("--lr-wsd-decay-iters", a.lr_wsd_decay_iters);
  b.add("--lr-wsd-decay-style", a.lr_wsd_decay_style);
  b.add("--weight-decay", a.optim.weight_decay);
  b.add("--adam-beta1", a.optim.beta1);
  b.add("--adam-beta2", a.optim.beta2);
  b.add("--adam-eps", a.optim.eps);
  b.add("--clip-grad", a.optim.clip_grad);
  const OptimizerArgs& o = a.optimizer_args;  // args/optimizer_args.h
  b.add("--optimizer", o.optimizer);
  b.add("--sgd-momentum", a.optim.sgd_momentum);
  b.add("--decoupled-lr", o.decoupled_lr);
  b.add("--decoupled-min-lr", o.decoupled_min_lr);
  b.add("--start-weight-decay", o.start_weight_decay);
  b.add("--end-weight-decay", o.end_weight_decay);
  b.add("--weight-decay-incr-style", o.weight_decay_incr_style);
  b.add("--use-checkpoint-opt-param-scheduler", o.use_checkpoint_opt_param_scheduler);
  b.add("--override-opt-param-scheduler", o.override_opt_param_scheduler);

  b.add("--micro-batch-size", a.micro_batch_size);
  b.add("--global-batch-size", a.global_batch_size);
  b.add("--train-iters", a.train_iters);
  b.add("--train-samples", a.train_samples);
  b.add("--lr-decay-samples", a.lr_decay_samples);
  b.add("--lr-warmup-samples", a.lr_warmup_samples);
  b.add("--lr-wsd-decay-samples", a.lr_wsd_decay_samples);
  b.add("--seed", a.seed);
  b.add("--skip-train", a.skip_train);

  b.add("--data-path", words_text(a.data_path));
  b.add("--train-data-path", words_text(a.train_data_path));
  b.add("--valid-data-path", words_text(a.valid_data_path));
  b.add("--test-data-path", words_text(a.test_data_path));
  b.add("--split", a.split);
  b.add("--mock-data", a.mock_data);
  b.add("--data-cache-path", a.data_cache_path);
  b.add("--mid-level-dataset-surplus", a.mid_level_dataset_surplus);
  b.add("--tokenizer-type", a.tokenizer_type);
  b.add("--vocab-file", a.vocab_file);
  b.add("--merge-file", a.merge_file);
  b.add("--tokenizer-model", a.tokenizer_model);
  b.add("--vocab-size", a.vocab_size);
  b.add("--reset-position-ids", a.documents.reset_position_ids);
  b.add("--reset-attention-mask", a.documents.reset_attention_mask);
  b.add("--eod-mask-loss", a.documents.eod_mask_loss);
  b.add("--calculate-per-token-loss", a.calculate_per_token_loss);

  b.add("--log-interval", a.log_interval);
  b.add("--eval-interval", a.eval_interval);
  b.add("--eval-iters", a.eval_iters);
  b.add("--log-json", a.log_json);
  b.add("--tensorboard-dir", a.tensorboard_dir);
  b.add("--tensorboard-log-interval", a.tensorboard_log_interval);
  b.add("--tensorboard-queue-size", a.tensorboard_queue_size);
  b.add("--log-timers-to-tensorboard", a.log_timers_to_tensorboard);
  b.add("--log-throughput", a.log_throughput);
  b.add("--no-log-loss-scale-to-tensorboard", a.no_log_loss_scale_to_tensorboard);
  b.add("--log-validation-ppl-to-tensorboard", a.log_validation_ppl_to_tensorboard);
  b.add("--log-memory-to-tensorboard", a.log_memory_to_tensorboard);
  b.add("--log-world-size-to-tensorboard", a.log_world_size_to_tensorboard);
  b.add("--log-batch-size-to-tensorboard", a.log_batch_size_to_tensorboard);
  b.add("--peak-tflops", a.peak_tflops);
  b.add("--device", a.device);
  b.add("--save", a.save);
  b.add("--save-interval", a.save_interval);
  b.add("--load", a.load);
  b.add("--no-load-optim", a.no_load_optim);
  b.add("--no-verify-checkpoint-checksums", a.no_verify_checkpoint_checksums);
  b.add("--finetune", a.finetune);
  b.add("--allow-changed-data", a.allow_changed_data);
  for (const InertFlag& f : inert_megatron_flags()) {  // as given ("" when not)
    std::string given;
    for (const std::string& g : a.inert_flags)
      if (g == f.name || g.rfind(std::string(f.name) + " ", 0) == 0) given = g;
    b.add(f.name, given);
  }
  b.add("--overwrite-checkpoints", a.overwrite_checkpoints);
  b.add("--exit-interval", a.exit_interval);
  b.add("--exit-duration-in-mins", a.exit_duration_in_mins);
  b.add("--exit-signal-handler", a.exit_signal_handler);

  // --profile (args/profile_args.h): every rank must agree on the range and
  // ranks, or the gather at its end would hang.
  b.add("--profile", a.profile.enabled);
  b.add("--profile-step-start", a.profile.step_start);
  b.add("--profile-step-end", a.profile.step_end);
  std::vector<std::string> profile_ranks;
  for (int r : a.profile.ranks) profile_ranks.push_back(std::to_string(r));
  b.add("--profile-ranks", words_text(profile_ranks));
  b.add("--profile-dir", a.profile.dir);
  b.add("--use-pytorch-profiler", a.profile.use_pytorch_profiler);
  const RunCheckArgs& c = a.checks;  // args/run_check_args.h
  b.add("--async-save", c.async_save);
  b.add("--no-save-optim", c.no_save_optim);
  b.add("--exit-on-missing-checkpoint", c.exit_on_missing_checkpoint);
  b.add("--log-params-norm", c.log_params_norm);
  b.add("--log-num-zeros-in-grad", c.log_num_zeros_in_grad);
  b.add("--log-progress", c.log_progress);
  b.add("--timing-log-level", int64_t(c.timing_log_level));
  b.add("--timing-log-option", c.timing_log_option);
  b.add("--log-straggler", c.log_straggler);
  b.add("--no-check-for-nan-in-loss-and-grad", !c.check_for_nan_in_loss_and_grad);
  b.add("--check-for-spiky-loss", c.check_for_spiky_loss);
  b.add("--rerun-mode", c.rerun_mode);
  b.add("--deterministic-mode", c.deterministic_mode);
  return b.out;
}

}  // namespace mt
