// Everything `megatron train` is told, named as Megatron-LM's flags
// (--num-layers → num_layers). Parsed by src/cli, validated in validate().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "args/batch_rampup.h"
#include "args/optimizer_args.h"
#include "args/profile_args.h"
#include "args/run_check_args.h"
#include "data/document_masks.h"
#include "kernels/precision.h"
#include "model/config.h"
#include "model/gpt_shapes.h"
#include "model/params.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace mt {

struct TrainArgs {
  ModelConfig model;
  OptimizerConfig optim;
  OptimizerArgs optimizer_args;  // --optimizer, --decoupled-lr, the WD schedule, resume rule

  // Parallel layout.
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  // Megatron's --context-parallel-size: the sequence split over CP ranks
  // (each holds chunks i and 2·CP-1-i of 2·CP), attention as a ring.
  int context_parallel_size = 1;
  // Megatron's --expert-model-parallel-size (MoE experts split over EP ranks)
  // and --expert-tensor-parallel-size (only 1: experts whole on their rank;
  // 0 = not given: 1 here, where Megatron's default is the dense TP size).
  int expert_model_parallel_size = 1;
  int expert_tensor_parallel_size = 0;
  bool sequence_parallel = false;
  int64_t num_layers_per_virtual_pipeline_stage = 0;  // 0: no interleaving
  int64_t decoder_first_pipeline_num_layers = 0;  // 0: even split
  int64_t decoder_last_pipeline_num_layers = 0;
  // Megatron's --account-for-embedding/loss-in-pipeline-split: the embedding
  // (loss) counts as a layer of the first (last) stage when PP splits the
  // layers; set as decoder_first/last_pipeline_num_layers by validate.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  bool pipeline_split_accounted = false;  // validate set them
  bool overlap_grad_reduce = false;
  int64_t ddp_bucket_size = 0;  // elements; 0 → 1M (measured best here; Megatron: max(40M, 1M·DP))
  bool log_parallel_layout = false;
  // Megatron's --distributed-timeout-minutes: the longest any rank waits in
  // one blocking collective or send/recv before it ends the job, naming the
  // group and operation (dist/watchdog.h). Fractions allowed (tests); 0: off.
  double distributed_timeout_minutes = 10;

  // Activation recompute (Megatron's flags).
  std::string recompute_granularity;  // "", "full", "selective"
  bool recompute_activations = false;  // Megatron's name for selective (set by the CLI)
  std::string recompute_method;       // "", "uniform", "block" (full only)
  int64_t recompute_num_layers = 0;
  // Selective granularity's modules (Megatron's --recompute-modules; none
  // given: core_attn). Honoured: all but the blocks not built (gdn_*, gdp_*, mhc).
  std::vector<std::string> recompute_modules;
  bool moe_layer_recompute = false;  // Megatron's deprecated alias: selective, modules += moe

  // Distributed optimizer (ZeRO-1) and mixed precision (Megatron's flags).
  bool use_distributed_optimizer = false;
  bool overlap_param_gather = false;
  // Megatron-FSDP (--use-megatron-fsdp, formerly --use-custom-fsdp) and its
  // --data-parallel-sharding-strategy: no_shard (as without FSDP), optim
  // (the distributed optimizer), optim_grads (and the gradients:
  // optim/staged_grads.h), optim_grads_params (and the weights:
  // optim/staged_params.h).
  bool use_megatron_fsdp = false;
  std::string data_parallel_sharding_strategy = "no_shard";
  // The optimizer state sharded over DP x CP: --use-distributed-optimizer,
  // or FSDP's optim / optim_grads.
  bool shard_optimizer() const {
    return use_distributed_optimizer ||
           (use_megatron_fsdp && data_parallel_sharding_strategy != "no_shard");
  }
  // The gradients sharded too (FSDP's optim_grads, ZeRO-2, and optim_grads_params).
  bool shard_grads() const {
    return use_megatron_fsdp && (data_parallel_sharding_strategy == "optim_grads" ||
                                 data_parallel_sharding_strategy == "optim_grads_params");
  }
  // And the weights (FSDP's optim_grads_params, ZeRO-3).
  bool shard_params() const {
    return use_megatron_fsdp && data_parallel_sharding_strategy == "optim_grads_params";
  }
  bool bf16 = false;
  bool fp16 = false;
  double loss_scale = 0;                 // fp16: > 0 is a static scale; 0 → dynamic
  double initial_loss_scale = 4294967296.0;  // 2^32
  double min_loss_scale = 1.0;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool log_memory = false;               // bytes per class, predicted and measured, after step 1

  // Batch and iterations.
  int64_t micro_batch_size = 1;
  int64_t global_batch_size = 0;  // 0 → micro_batch_size * DP
  int64_t train_iters = 0;  // given, or --train-samples / global batch (resolved in validate)
  // Megatron's sample-based training (instead of the *-iters flags): the run
  // trains train_samples / global batch iterations, and the LR schedule's
  // lengths are these samples over the global batch (0: not given).
  int64_t train_samples = 0, lr_decay_samples = 0, lr_warmup_samples = 0, lr_wsd_decay_samples = 0;
  // Megatron's --rampup-batch-size START INCR SAMPLES (args/batch_rampup.h;
  // empty: a constant global batch). Sample-based runs only.
  std::vector<int64_t> rampup_batch_size;
  // Megatron's --step-batch-size-schedule "THRESHOLD:BS ..." (thresholds in
  // tokens; args/batch_rampup.h; empty: none). Without --global-batch-size,
  // which then becomes the largest batch of the schedule (what memory is
  // planned for).
  std::string step_batch_size_schedule;
  uint64_t seed = 1234;

  // Learning rate.
  double lr = 1e-3, min_lr = 0.0;
  int64_t lr_warmup_iters = 0;
  double lr_warmup_fraction = -1;  // -1: unset
  int64_t lr_decay_iters = 0;      // 0 → train_iters
  std::string lr_decay_style = "linear";
  int64_t lr_wsd_decay_iters = 0;
  std::string lr_wsd_decay_style = "exponential";

  // Data.
  // Megatron's blends (data/blend.h): "PREFIX", "W1 PREFIX1 W2 PREFIX2 ..." or
  // "PREFIX1 PREFIX2 ..."; either data_path (cut by split per dataset) or a
  // blend per split (each dataset whole).
  std::vector<std::string> data_path;
  std::vector<std::string> train_data_path, valid_data_path, test_data_path;
  std::string split;  // "": 969,30,1 with --data-path (Megatron's default)
  // Megatron's --mock-data: its MockGPTDataset's documents instead of a data
  // path (data/mock_gpt_dataset.h), with the tokenizer's vocabulary and eod.
  bool mock_data = false;
  // The training samples come from the program (megatron::DataSource, given to
  // megatron::Trainer), not from a flag: no --data-path or --mock-data is
  // needed (they may still give the validation and test splits). Not a flag.
  bool program_train_data = false;
  // Files holding the data path arguments (args/data_args_file.h).
  std::string data_args_path, per_split_data_args_path;
  std::string data_cache_path;             // where blend indices are cached ("": not cached)
  double mid_level_dataset_surplus = 0.005;  // extra samples built per blended dataset
  // "" (no tokenizer flags): the checkpoint's when resuming, else char.
  std::string tokenizer_type;  // char | NullTokenizer | GPT2BPETokenizer | SentencePieceTokenizer | Llama2Tokenizer | HuggingFaceTokenizer
  std::string vocab_file;      // char: the vocab JSON written by preprocess; GPT-2: vocab.json
  std::string merge_file;      // GPT-2: merges.txt
  std::string tokenizer_model; // SentencePiece / Llama 2: the .model file
  int64_t vocab_size = 0;               // NullTokenizer
  // --reset-position-ids, --reset-attention-mask, --eod-mask-loss (the eod id
  // is the tokenizer's, set when it is resolved).
  DocumentFlags documents;
  bool calculate_per_token_loss = false;  // the loss over the iteration's counted tokens
  int64_t tokenizer_eod = -1;  // derived: the run's tokenizer's eod (-1: none), for --mock-data

  // Logging, evaluation, checkpoints, exit.
  int64_t log_interval = 100;
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  std::string log_json;
  // TensorBoard (observe/tensorboard_log.h; Megatron's flags and defaults; all
  // but the directory are ignored without it, as in Megatron).
  std::string tensorboard_dir;
  int64_t tensorboard_log_interval = 1;
  int64_t tensorboard_queue_size = 1000;  // accepted: each log call's records are flushed
  bool log_timers_to_tensorboard = false;
  bool log_throughput = false;  // the text log always shows it; adds TensorBoard's `throughput`
  bool no_log_loss_scale_to_tensorboard = false;
  bool log_validation_ppl_to_tensorboard = false;
  bool log_memory_to_tensorboard = false;
  bool log_world_size_to_tensorboard = false;
  bool log_batch_size_to_tensorboard = false;  // accepted: batch-size is always written
  ProfileArgs profile;  // --profile and its range, ranks and folder (observe/profiler.h)
  RunCheckArgs checks;  // --async-save, --log-params-norm, ... (args/run_check_args.h)
  double peak_tflops = 0;  // 0 → measure at start-up
  std::string device = "cpu";  // cpu | cuda (backend/device.h)
  std::string save;
  int64_t save_interval = 0;
  std::string load;
  bool no_load_optim = false;
  bool no_verify_checkpoint_checksums = false;  // load without checking the files' CRC-32C
  bool overwrite_checkpoints = false;  // let --save hold checkpoints this run did not load
  bool skip_memory_check = false;      // start even if the planned memory exceeds the host's
  bool attention_softmax_in_fp32 = false;  // accepted (Megatron flag); softmax is always fp32
  bool accumulate_allreduce_grads_in_fp32 = false;  // accepted (Megatron flag); always so here
  // bf16 runs: the DP gradient reduction moves bf16 (Megatron flag); the
  // gradients still accumulate in fp32 and the optimizer reads fp32.
  bool grad_reduce_in_bf16 = false;
  // --use-checkpoint-args: the model fields not given as flags come from the
  // --load checkpoint (model_flags_given: the JSON keys of those given).
  bool use_checkpoint_args = false;
  // --finetune: load only the weights; iteration 0, no samples consumed, a
  // fresh optimizer (Megatron's flag; a release checkpoint loads so anyway).
  bool finetune = false;
  std::vector<std::string> model_flags_given;
  // Megatron flags given that change nothing here (flags/compat_flags.h), as
  // written ("--attention-backend auto"): one start-up note lists them.
  std::vector<std::string> inert_flags;
  // The --config files the flags came from (inputs: no output may replace one).
  std::vector<std::string> config_files;
  // Resume on a dataset whose .bin/.idx changed since the checkpoint was saved
  // (its sizes and CRC-32C are recorded there): without this, an error.
  bool allow_changed_data = false;
  // Megatron's --skip-train: evaluate the --load checkpoint on the validation
  // and test splits, write val_* / test_* to --log-json, and exit.
  bool skip_train = false;
  int64_t exit_interval = 0;
  double exit_duration_in_mins = 0;
  // Megatron's --exit-signal-handler: SIGTERM / SIGINT save and exit at the
  // end of the iteration. Always so here; the flag is accepted.
  bool exit_signal_handler = false;

  // Derived.
  int64_t dp_size = 1;
  // After any ramp-up (the most an iteration runs: what memory is planned for).
  int64_t num_micro_batches() const { return global_batch_size / (micro_batch_size * dp_size); }
  BatchSchedule batch_schedule() const {
    return {global_batch_size, micro_batch_size, dp_size, parse_rampup(rampup_batch_size),
            parse_step_schedule(step_batch_size_schedule, model.seq_length)};
  }
  // The samples of one iteration in the LR schedule's lengths: Megatron's
  // args.global_batch_size, which a step schedule leaves at micro-batch x DP.
  int64_t lr_batch() const {
    return step_batch_size_schedule.empty() ? global_batch_size : micro_batch_size * dp_size;
  }
  void validate_batch_rampup() const;  // part of validate (args/batch_rampup.cc)
  void account_in_pipeline_split();  // part of validate
  // Model chunks per pipeline rank (Megatron's virtual pipeline size).
  int64_t virtual_stages() const {
    return num_layers_per_virtual_pipeline_stage > 0
               ? model.num_layers / (pipeline_model_parallel_size *
                                     num_layers_per_virtual_pipeline_stage)
               : 1;
  }
  LrSchedule lr_schedule() const;
  MathMode math_mode() const {
    return bf16 ? MathMode::kBF16 : fp16 ? MathMode::kF16 : MathMode::kF32;
  }
  // The layers (and model chunks) pipeline rank pp_rank holds, for a TP shard.
  StageLayout stage_layout(int tp_rank, int tp_size, int pp_rank, int pp_size,
                           int ep_rank = 0) const;
  // Megatron-LM's rule (training/arguments.py): with TP 1 there is nothing
  // for sequence parallelism to split, so --sequence-parallel is switched off
  // with a warning and the run goes on as without it. Returns the warning, ""
  // when the flag was not set or TP > 1. Before validate().
  std::string disable_sequence_parallel_without_tp();
  // The warning (or "") for an MoE run at TP > 1 without
  // --expert-tensor-parallel-size: experts stay whole, not Megatron's ETP = TP.
  std::string expert_tensor_parallel_default() const;
  // A negative --moe-expert-capacity-factor given for an MoE model: the line
  // saying it means dropless (Megatron's None); "" otherwise.
  std::string capacity_factor_note() const;
  // Checks every flag's range and every layout-dependent constraint (sizes
  // with checked arithmetic, naming the flags); every rank calls it.
  void validate(int world_size);
  void validate_moe(int world_size) const;  // part of validate: the MoE flags and layout
  void validate_fsdp(int world_size) const;  // part of validate: Megatron-FSDP's flags
  // Part of validate (args/recompute_args.cc): --moe-layer-recompute as
  // Megatron maps it, the granularity, method and modules checked.
  void validate_recompute();
  // What the model recomputes (ModelRuntime, the memory plan).
  Recompute recompute() const;
  // Each flag's own range (> 0 sizes, betas in [0, 1), ...), before any use.
  void check_flag_ranges() const;
  // Fails (naming the flags) if the sizes they multiply into overflow int64.
  void check_size_arithmetic() const;
  // --data-path or the per-split paths (one of them), each a blend that parses.
  void check_data_flags() const;
  // Every dataset prefix of --data-path or the per-split paths (blends parsed).
  std::vector<std::string> dataset_prefixes() const;
  // Megatron's refusals when iteration- and sample-based flags are mixed.
  void check_iterations_or_samples() const;
};

}  // namespace mt
