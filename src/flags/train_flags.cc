// `megatron train`'s flags: Megatron-LM's names, or a config file of them.
#include "flags/train_flags.h"

#include <algorithm>
#include <memory>

#include "flags/compat_flags.h"
#include "flags/field_flags.h"
#include "flags/model_flags.h"
#include "flags/profile_flags.h"
#include "flags/strict_numbers.h"
#include "core/error.h"
#include "args/data_args_file.h"
#include "args/flag_table.h"

namespace mt {

namespace {

// A flag taking a list of words (--data-path), one group per occurrence.
struct ListFlag {
  const char* flag;
  std::vector<std::string>* target;
  std::vector<std::vector<std::string>> groups;
};

}  // namespace

CLI::App* add_train_subcommand(CLI::App& parent) {
  return parent.add_subcommand("train", "train a GPT model (launch with mpirun for many ranks)");
}

std::function<TrainArgs()> add_train_flags(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  ModelConfig& m = a->model;
  // Like argparse in Megatron-LM: a repeated flag takes its last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", a->config_files,
                 "read flags from a TOML file of `flag-name = value` lines "
                 "(expanded before the other flags, which win)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto group = [&](const char* name) { return app.add_option_group(name); };
  app.footer(
      "Memory per rank (P = parameters this rank holds, d = data-parallel size; --log-memory\n"
      "  prints each class predicted and measured): the model's weights are fp32 (4P bytes) or,\n"
      "  with --bf16, bf16 (2P; what every kernel reads); gradients are fp32 (4P); the optimizer\n"
      "  holds Adam's fp32 m and v (8P) and, with --bf16, the fp32 main weights (4P); with\n"
      "  --use-distributed-optimizer the optimizer's share is divided by d. So fp32: 16 bytes\n"
      "  per parameter, or 8 + 8/d; bf16: 18, or 6 + 12/d (Megatron-LM's). Saved activations\n"
      "  are fp32, or bf16 with --bf16 (norm and softmax statistics stay fp32), about half;\n"
      "  full recompute keeps only each layer's input. A checkpoint stores the weights as held\n"
      "  (BF16 with --bf16) and the fp32 main weights beside the Adam moments: resumes are exact.");

  CLI::Option_group* model = group("model");
  // The one list of model flags (plan registers the same); which were given
  // is recorded when the command runs.
  auto model_options = std::make_shared<std::vector<std::pair<std::string, CLI::Option*>>>(
      add_model_flags(*model, m));
  for_each_model_group_flag(*a, declare_flags(*model));

  CLI::Option_group* mem = group("memory");
  mem->add_option("--recompute-granularity", a->recompute_granularity,
                  "full: keep only layer inputs, re-run forward in backward; selective: the "
                  "--recompute-modules (the attention core is always recomputed here: "
                  "probabilities are never stored)");
  mem->add_option("--recompute-modules", a->recompute_modules,
                  "with --recompute-granularity selective, Megatron's modules to recompute: "
                  "core_attn (the default), mlp (the dense MLPs), moe (the MoE layers: only their "
                  "input is kept, their forward re-runs before their backward), layernorm (the "
                  "norms' outputs), moe_act (the experts' activation output; with "
                  "--moe-grouped-gemm), shared_experts (the shared expert), mla_up_proj (MLA's "
                  "per-head q, k, v; with --multi-latent-attention)");
  mem->add_flag("--moe-layer-recompute", a->moe_layer_recompute,
                "Megatron's deprecated name for --recompute-granularity selective "
                "--recompute-modules moe (added to the modules given)");
  mem->add_flag("--recompute-activations", a->recompute_activations,
                "Megatron-LM's name for --recompute-granularity selective (it overrides that "
                "flag, as in Megatron)");
  mem->add_option("--recompute-method", a->recompute_method,
                  "full recompute: uniform (groups of N layers) or block (the first N layers)");
  mem->add_option("--recompute-num-layers", a->recompute_num_layers, "N for --recompute-method");
  mem->add_flag("--use-distributed-optimizer", a->use_distributed_optimizer,
                "ZeRO-1: shard the optimizer state (Adam moments, bf16's fp32 main weights) over "
                "DP (reduce-scatter grads, all-gather the weights)");
  mem->add_flag("--use-megatron-fsdp,--use-custom-fsdp", a->use_megatron_fsdp,
                "Megatron-FSDP: shard over DP (x CP) what --data-parallel-sharding-strategy "
                "says (--use-custom-fsdp: its former name)");
  mem->add_option("--data-parallel-sharding-strategy", a->data_parallel_sharding_strategy,
                  "with --use-megatron-fsdp: no_shard (default), optim (the distributed "
                  "optimizer), optim_grads (and the gradients: each layer's reduce-scattered "
                  "as backward produces it, in every micro-batch), optim_grads_params (and the "
                  "weights: each layer's all-gathered before its forward and its backward)");
  mem->add_flag("--overlap-param-gather", a->overlap_param_gather,
                "distributed optimizer: the next forward waits per bucket for the all-gather");
  for_each_precision_flag(*a, declare_flags(*mem));

  CLI::Option_group* par = group("parallelism");
  for_each_parallelism_flag(*a, declare_flags(*par));

  CLI::Option_group* opt = group("optimizer");
  for_each_lr_flag(*a, declare_flags(*opt));
  for_each_lr_samples_flag(*a, declare_flags(*opt));
  for_each_optimizer_flag(*a, declare_flags(*opt));

  CLI::Option_group* run = group("run");
  run->add_option("--micro-batch-size", a->micro_batch_size, "sequences per micro-batch");
  run->add_option("--global-batch-size", a->global_batch_size, "sequences per iteration");
  run->add_option("--train-iters", a->train_iters, "iterations to train");
  run->add_option("--train-samples", a->train_samples,
                  "instead of --train-iters (Megatron's sample-based training): train this many "
                  "samples, --train-samples / --global-batch-size iterations");
  run->add_option("--rampup-batch-size", a->rampup_batch_size,
                  "START INCR SAMPLES (with --train-samples): the global batch starts at START "
                  "and grows by INCR every SAMPLES / ((--global-batch-size - START) / INCR) "
                  "consumed samples (Megatron-LM's ramp-up)")
      ->expected(3);
  run->add_option("--step-batch-size-schedule", a->step_batch_size_schedule,
                  "\"THRESHOLD:BS ...\" instead of --global-batch-size: the global batch from "
                  "each threshold of consumed tokens on (K, M, B, T suffixes; Megatron-LM's "
                  "step schedule, e.g. \"0:16 2.4B:320\")");
  run->add_option("--seed", a->seed, "seed of init, dropout and data order");
  run->add_option("--device", a->device,
                  "cpu (default) or cuda: where parameters, gradients, optimizer state and "
                  "activations live and every kernel runs (cuda needs a build with "
                  "-DMT_CUDA=ON and an NVIDIA GPU)");
  run->add_flag("--skip-train", a->skip_train,
                "no training: evaluate the --load checkpoint on --eval-iters batches of the "
                "validation and test splits, print and write val_loss/val_ppl and "
                "test_loss/test_ppl to --log-json, and exit (saves nothing)");

  CLI::Option_group* data = group("data");
  // Each occurrence of a list flag is its own group: a repeat is refused (argparse
  // would silently keep the last one).
  auto lists = std::make_shared<std::vector<ListFlag>>();
  auto list_option = [&](const char* flag, std::vector<std::string>* target, const char* help) {
    lists->push_back({flag, target, {}});
    data->add_option(flag, lists->back().groups, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  lists->reserve(4);
  list_option("--data-path", &a->data_path,
              "the dataset: a .bin/.idx prefix, or a blend \"W1 PREFIX1 W2 PREFIX2 ...\" "
              "(weights normalized) or \"PREFIX1 PREFIX2 ...\" (weighted by size); each cut "
              "by --split");
  list_option("--train-data-path", &a->train_data_path,
              "instead of --data-path: the training blend (each dataset whole)");
  list_option("--valid-data-path", &a->valid_data_path, "the validation blend (whole datasets)");
  list_option("--test-data-path", &a->test_data_path, "the test blend (whole datasets)");
  data->add_option("--data-args-path", a->data_args_path,
                   "instead of --data-path: a file holding its arguments (whitespace-separated)");
  data->add_option("--per-split-data-args-path", a->per_split_data_args_path,
                   "instead of --train/valid/test-data-path: a JSON file of train, valid and "
                   "test, each a string of the blend's words, a list of them, or null");
  data->add_flag("--mock-data", a->mock_data,
                 "instead of a data path: Megatron's mock documents (ids 1, 2, ... then the "
                 "tokenizer's eod; 100000 documents of random length, cut 1,1,1)");
  data->add_option("--split", a->split,
                   "train,valid,test weights of each --data-path dataset (default 969,30,1)");
  data->add_option("--data-cache-path", a->data_cache_path,
                   "folder where blend indices are saved and reused (default: built each run)");
  data->add_option("--mid-level-dataset-surplus", a->mid_level_dataset_surplus,
                   "weighted blends: each dataset builds this fraction more samples than the "
                   "blend draws (default 0.005)");
  data->add_option("--tokenizer-type", a->tokenizer_type,
                   "char | NullTokenizer | GPT2BPETokenizer | SentencePieceTokenizer | "
                   "Llama2Tokenizer | HuggingFaceTokenizer (default: the checkpoint's when resuming, else char)");
  data->add_option("--vocab-file", a->vocab_file,
                   "char: the vocabulary JSON from preprocess; GPT2BPETokenizer: vocab.json");
  data->add_option("--merge-file", a->merge_file, "GPT2BPETokenizer: merges.txt");
  data->add_option("--tokenizer-model", a->tokenizer_model,
                   "SentencePieceTokenizer / Llama2Tokenizer: the SentencePiece .model file; "
                   "HuggingFaceTokenizer: the folder holding tokenizer.json");
  data->add_option("--vocab-size", a->vocab_size, "NullTokenizer vocabulary size");
  // Documents inside a sample (data/document_masks.h), as Megatron's GPT dataset.
  data->add_flag("--reset-position-ids", a->documents.reset_position_ids,
                 "positions restart at 0 after every end-of-document token");
  data->add_flag("--reset-attention-mask", a->documents.reset_attention_mask,
                 "attention never crosses an end-of-document token");
  data->add_flag("--eod-mask-loss", a->documents.eod_mask_loss,
                 "no loss where the input token is an end-of-document token");
  data->add_flag("--calculate-per-token-loss", a->calculate_per_token_loss,
                 "the loss (and its gradient) over the tokens counted in the whole iteration, "
                 "not averaged per micro-batch");

  CLI::Option_group* log = group("logging and checkpoints");
  log->add_option("--log-interval", a->log_interval, "iterations between log lines");
  log->add_option("--eval-interval", a->eval_interval, "iterations between evaluations (0: off)");
  log->add_option("--eval-iters", a->eval_iters, "global batches per evaluation");
  log->add_option("--log-json", a->log_json, "append JSON lines of the logged numbers here");
  CLI::Option_group* tb = group("TensorBoard (ignored without --tensorboard-dir)");
  for_each_tensorboard_flag(*a, declare_flags(*tb));
  log->add_option("--peak-tflops", a->peak_tflops, "MFU denominator per rank (default: measured)");
  log->add_option("--save", a->save, "checkpoint directory to save to");
  log->add_option("--save-interval", a->save_interval, "iterations between checkpoints");
  log->add_option("--load", a->load, "checkpoint directory to resume from");
  log->add_flag("--no-load-optim", a->no_load_optim, "do not load the optimizer state");
  log->add_flag("--no-verify-checkpoint-checksums", a->no_verify_checkpoint_checksums,
                "load --load without checking its files' CRC-32C checksums (very large runs)");
  log->add_flag("--allow-changed-data", a->allow_changed_data,
                "resume even though a --data-path dataset's .bin/.idx changed since the --load "
                "checkpoint was saved (without it, an error: the samples after the checkpoint's "
                "would be other ones)");
  log->add_flag("--finetune", a->finetune,
                "load only the weights of --load: start at iteration 0 with a fresh optimizer "
                "and the data from its beginning");
  log->add_flag("--overwrite-checkpoints", a->overwrite_checkpoints,
                "save even though --save holds checkpoints this run did not load (they may be "
                "overwritten; without it that is an error)");
  log->add_option("--exit-interval", a->exit_interval, "save and exit at iterations divisible by N");
  log->add_option("--exit-duration-in-mins", a->exit_duration_in_mins, "save and exit after N minutes");
  log->add_flag("--exit-signal-handler", a->exit_signal_handler,
                "accepted for Megatron-LM compatibility: SIGTERM and SIGINT always save a "
                "checkpoint (with --save) and exit at the end of the iteration");

  add_profile_flags(app, &a->profile);
  for_each_run_check_flag(*a, declare_flags(*group("checkpoint mechanics, checks and logs")));
  const auto inert = add_inert_megatron_flags(app);
  make_integer_options_strict(app);

  return [a, model_options, lists, inert]() {
    if (a->recompute_activations) a->recompute_granularity = "selective";
    a->inert_flags = inert();
    const bool overlap = std::find(a->inert_flags.begin(), a->inert_flags.end(),
                                   "--moe-shared-expert-overlap") != a->inert_flags.end();
    MT_CHECK(!overlap || a->model.moe_token_dispatcher_type == "alltoall",
             "--moe-shared-expert-overlap works only with the alltoall token dispatcher (as in "
             "Megatron-LM), not '", a->model.moe_token_dispatcher_type,
             "'; fix: add --moe-token-dispatcher-type alltoall, or leave the flag out");
    for (const auto& [key, option] : *model_options)
      if (option->count() > 0) a->model_flags_given.push_back(key);
    for (const ListFlag& l : *lists) {
      MT_CHECK(l.groups.size() <= 1, l.flag, " is given ", l.groups.size(), " times; Megatron-LM "
               "would train on the last one only; fix: give one ", l.flag, " with every dataset "
               "(e.g. ", l.flag, " 0.3 data/a_text_document 0.7 data/b_text_document)");
      if (!l.groups.empty()) *l.target = l.groups[0];
    }
    read_data_args_files(*a);
    return *a;
  };
}

}  // namespace mt
