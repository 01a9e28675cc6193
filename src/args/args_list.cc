#include "args/args_list.h"

#include <charconv>
#include <type_traits>

#include "args/flag_table.h"
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
  // An entry of args/flag_table.h's lists: "!--no-name" (a switch that
  // clears its member) is listed as --no-name with the negated value.
  template <class T>
  void operator()(const char* names, const char*, const T& v) {
    if constexpr (std::is_same_v<T, bool>)
      if (*names == '!') return add(names + 1, !v);
    add(names, v);
  }
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
  for_each_model_group_flag(a, b);

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
  for_each_precision_flag(a, b);

  for_each_parallelism_flag(a, b);

  for_each_lr_flag(a, b);
  for_each_optimizer_flag(a, b);

  b.add("--micro-batch-size", a.micro_batch_size);
  b.add("--global-batch-size", a.global_batch_size);
  b.add("--train-iters", a.train_iters);
  b.add("--train-samples", a.train_samples);
  for_each_lr_samples_flag(a, b);
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
  for_each_tensorboard_flag(a, b);
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
  for_each_run_check_flag(a, b);
  return b.out;
}

}  // namespace mt
