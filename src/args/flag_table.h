// `megatron train`'s flags as lists, each flag written once: its names, its
// --help text and the TrainArgs member it sets. Two readers walk the same
// lists: the command line declares its options from them
// (flags/field_flags.h: a bool member is a switch, any other takes a value),
// and argument_list (args/args_list.h) writes each member's value under the
// first name, so a flag added to a list is parsed, compared between the
// ranks and written by `megatron config` with nothing else to edit.
//
// Each list is `for_each_<group>_flag(args, visit)`: `args` a TrainArgs or a
// const one, `visit(names, help, member)` called in --help order, `names` as
// CLI11 takes them: "--name", "--name,--alias" (the first is the one
// listed), or "!--no-name" for a switch that sets its bool member to false
// (listed as --no-name with the negated value). A list holds flags that
// stand in the same order in --help and in the argument list; where the two
// orders part (the sample-based lengths of the learning-rate schedule:
// --help shows them with the schedule, the argument list after
// --train-samples), those flags are a list of their own that each reader
// calls at its place.
//
// The model's flags have their list in model/config.h (for_each_model_field,
// which plan reads as well), Megatron's inert flags theirs in inert_flags.h.
// Still declared in flags/train_flags.cc and listed again by hand in
// args_list.cc (their --help order and list order part, or they parse
// specially): the memory group's recompute and sharding flags; the run group (with
// --rampup-batch-size, three numbers); the data group (--data-path and its
// siblings, one word list per occurrence); the logging and checkpoint
// group; the profiling group (flags/profile_flags.cc; --profile-ranks takes a
// list). Each moves here as a list of its own where its orders agree.
#pragma once

#include "args/args.h"

namespace mt {

// The model group's flags beyond ModelConfig's.
template <class Args, class Visit>
void for_each_model_group_flag(Args& a, Visit&& visit) {
  visit("--use-checkpoint-args",
        "with --load: the model flags not given here come from the checkpoint (e.g. one made by "
        "`megatron convert`)",
        a.use_checkpoint_args);
  visit("--attention-softmax-in-fp32",
        "accepted for Megatron-LM compatibility: softmax is always fp32 here",
        a.attention_softmax_in_fp32);
}

// The memory group's precision flags, --bf16 to --log-memory.
template <class Args, class Visit>
void for_each_precision_flag(Args& a, Visit&& visit) {
  visit("--bf16",
        "bf16 weights, activations and GEMM operands; fp32 main weights (in the optimizer), grads, "
        "statistics and loss",
        a.bf16);
  visit("--accumulate-allreduce-grads-in-fp32",
        "accepted for Megatron-LM compatibility: gradients always accumulate in fp32 here, and "
        "reduce over DP in fp32 unless --grad-reduce-in-bf16",
        a.accumulate_allreduce_grads_in_fp32);
  visit("--grad-reduce-in-bf16",
        "with --bf16: the DP gradient all-reduce (reduce-scatter with --use-distributed-optimizer) "
        "moves bf16, half the bytes; gradients still accumulate in fp32 and the optimizer reads "
        "fp32; the tied-embedding all-reduce stays fp32",
        a.grad_reduce_in_bf16);
  visit("--fp16", "fp16 GEMM operands with loss scaling, fp32 main weights", a.fp16);
  visit("--loss-scale", "fp16: static loss scale (default: dynamic)", a.loss_scale);
  visit("--initial-loss-scale", "fp16: first dynamic scale", a.initial_loss_scale);
  visit("--min-loss-scale", "fp16: lowest dynamic scale", a.min_loss_scale);
  visit("--loss-scale-window", "fp16: clean steps before the scale doubles", a.loss_scale_window);
  visit("--hysteresis", "fp16: overflows tolerated before backing off", a.hysteresis);
  visit("--skip-memory-check",
        "start even when the predicted memory of a host's ranks exceeds its available memory",
        a.skip_memory_check);
  visit("--log-memory",
        "after the first step print bytes per class per rank, predicted and measured (and write "
        "one --log-json record per rank)",
        a.log_memory);
}

// The parallelism group: the mesh, the pipeline split, SP, the DP buckets,
// the collectives' timeout.
template <class Args, class Visit>
void for_each_parallelism_flag(Args& a, Visit&& visit) {
  visit("--tensor-model-parallel-size", "TP size", a.tensor_model_parallel_size);
  visit("--pipeline-model-parallel-size", "PP size", a.pipeline_model_parallel_size);
  visit("--context-parallel-size",
        "CP size: the sequence split over CP ranks (2 of 2·CP chunks each, causal load balance), "
        "ring attention; gradients averaged over DP x CP",
        a.context_parallel_size);
  visit("--expert-model-parallel-size",
        "EP size: MoE experts split over EP ranks (contiguous), tokens exchanged by the token "
        "dispatcher",
        a.expert_model_parallel_size);
  visit("--expert-tensor-parallel-size",
        "expert TP size (only 1: each expert whole on its rank; not given: 1, with a warning at TP "
        "> 1, where Megatron-LM's default is TP)",
        a.expert_tensor_parallel_size);
  visit("--num-layers-per-virtual-pipeline-stage",
        "layers per model chunk: interleaved 1F1B with L/(PP x this) chunks per rank",
        a.num_layers_per_virtual_pipeline_stage);
  visit("--decoder-first-pipeline-num-layers",
        "layers on the first pipeline stage (default: even split)",
        a.decoder_first_pipeline_num_layers);
  visit("--decoder-last-pipeline-num-layers",
        "layers on the last pipeline stage, which also runs the output layer",
        a.decoder_last_pipeline_num_layers);
  visit("--account-for-embedding-in-pipeline-split",
        "count the embedding as a layer of the first stage when PP splits the layers",
        a.account_for_embedding_in_pipeline_split);
  visit("--account-for-loss-in-pipeline-split",
        "count the loss as a layer of the last stage when PP splits the layers",
        a.account_for_loss_in_pipeline_split);
  visit("--sequence-parallel", "shard LayerNorm, dropout and residuals along the sequence over TP",
        a.sequence_parallel);
  visit("--overlap-grad-reduce",
        "start each DP gradient bucket's all-reduce as soon as it is complete",
        a.overlap_grad_reduce);
  visit("--ddp-bucket-size",
        "DP gradient bucket size in elements (default 1M; see bench/README.md)",
        a.ddp_bucket_size);
  visit("--log-parallel-layout", "print every group's ranks", a.log_parallel_layout);
  visit("--distributed-timeout-minutes",
        "end the job when a rank waits longer than this in one collective or send/recv (a stopped "
        "or unreachable peer), naming the group and operation; fractions allowed, 0: wait forever "
        "(default 10)",
        a.distributed_timeout_minutes);
}

// The learning-rate schedule by iterations, --lr to --lr-wsd-decay-iters.
template <class Args, class Visit>
void for_each_lr_flag(Args& a, Visit&& visit) {
  visit("--lr", "peak learning rate", a.lr);
  visit("--min-lr", "learning rate at the end of decay", a.min_lr);
  visit("--lr-warmup-iters", "linear warm-up iterations", a.lr_warmup_iters);
  visit("--lr-warmup-fraction", "warm-up as a fraction of the decay (iterations or samples)",
        a.lr_warmup_fraction);
  visit("--lr-decay-iters", "decay iterations (default train-iters)", a.lr_decay_iters);
  visit("--lr-decay-style", "constant|linear|cosine|WSD", a.lr_decay_style);
  visit("--lr-wsd-decay-iters", "WSD: iterations of the final decay", a.lr_wsd_decay_iters);
}

// The schedule's lengths in samples, for --train-samples runs.
template <class Args, class Visit>
void for_each_lr_samples_flag(Args& a, Visit&& visit) {
  visit("--lr-decay-samples", "with --train-samples: decay samples (default --train-samples)",
        a.lr_decay_samples);
  visit("--lr-warmup-samples", "with --train-samples: linear warm-up samples", a.lr_warmup_samples);
  visit("--lr-wsd-decay-samples", "with --train-samples, WSD: samples of the final decay",
        a.lr_wsd_decay_samples);
}

// The rest of the optimizer group: the WSD decay's shape, AdamW's
// constants, clipping, and Megatron-LM's optimizer-choice and scheduler
// flags (args/optimizer_args.h says what each means).
template <class Args, class Visit>
void for_each_optimizer_flag(Args& a, Visit&& visit) {
  visit("--lr-wsd-decay-style", "WSD: linear|cosine|exponential|minus_sqrt",
        a.lr_wsd_decay_style);
  visit("--weight-decay",
        "weight decay (not on biases/norms; AdamW: decoupled, SGD: added to the gradient)",
        a.optim.weight_decay);
  visit("--adam-beta1", "Adam beta1", a.optim.beta1);
  visit("--adam-beta2", "Adam beta2", a.optim.beta2);
  visit("--adam-eps", "Adam epsilon", a.optim.eps);
  visit("--clip-grad", "clip the global gradient L2 norm (0: off)", a.optim.clip_grad);
  auto& o = a.optimizer_args;
  visit("--optimizer",
        "adam (AdamW, default) or sgd (torch's SGD: momentum --sgd-momentum, weight decay added "
        "to the gradient)",
        o.optimizer);
  visit("--sgd-momentum", "SGD momentum factor (default 0.9)", a.optim.sgd_momentum);
  visit("--decoupled-lr",
        "the input embedding's and output layer's own peak learning rate (same schedule; "
        "default: --lr)",
        o.decoupled_lr);
  visit("--decoupled-min-lr",
        "with --decoupled-lr: their learning rate at the end of decay (default: --min-lr)",
        o.decoupled_min_lr);
  visit("--start-weight-decay",
        "weight decay at the start (with --weight-decay-incr-style linear|cosine)",
        o.start_weight_decay);
  visit("--end-weight-decay", "weight decay at the end of training (>= the start)",
        o.end_weight_decay);
  visit("--weight-decay-incr-style",
        "constant (--weight-decay, default), linear or cosine from --start-weight-decay to "
        "--end-weight-decay over the training iterations",
        o.weight_decay_incr_style);
  visit("--use-checkpoint-opt-param-scheduler,--use-checkpoint-opt_param-scheduler",
        "on resume, take the LR and weight-decay schedule (--lr, --min-lr, warm-up, decay "
        "length and style, weight-decay ends and style) from the checkpoint",
        o.use_checkpoint_opt_param_scheduler);
  visit("--override-opt-param-scheduler,--override-opt_param-scheduler",
        "on resume, take that schedule from this command line (without either flag the two "
        "must agree, as in Megatron-LM)",
        o.override_opt_param_scheduler);
}

// The TensorBoard group (ignored without --tensorboard-dir).
template <class Args, class Visit>
void for_each_tensorboard_flag(Args& a, Visit&& visit) {
  visit("--tensorboard-dir",
        "write TensorBoard event files here (the last rank; a new file each run)",
        a.tensorboard_dir);
  visit("--tensorboard-log-interval", "iterations between TensorBoard values (default 1)",
        a.tensorboard_log_interval);
  visit("--tensorboard-queue-size",
        "accepted (Megatron flag): every log call's values are flushed at once",
        a.tensorboard_queue_size);
  visit("--log-timers-to-tensorboard",
        "also write iteration-time and the forward-backward, all-grads-sync and optimizer times "
        "(ms, slowest rank)",
        a.log_timers_to_tensorboard);
  visit("--log-throughput",
        "with --log-timers-to-tensorboard, also write throughput (TFLOP/s per rank; the text log "
        "always shows it)",
        a.log_throughput);
  visit("--no-log-loss-scale-to-tensorboard", "do not write loss-scale",
        a.no_log_loss_scale_to_tensorboard);
  visit("--log-validation-ppl-to-tensorboard", "also write the validation perplexity",
        a.log_validation_ppl_to_tensorboard);
  visit("--log-memory-to-tensorboard",
        "also write the last rank's measured memory per class (bytes)",
        a.log_memory_to_tensorboard);
  visit("--log-world-size-to-tensorboard", "also write world-size",
        a.log_world_size_to_tensorboard);
  visit("--log-batch-size-to-tensorboard",
        "accepted (older Megatron flag): batch-size is always written",
        a.log_batch_size_to_tensorboard);
}

// Checkpoint mechanics, checks and logs (args/run_check_args.h).
template <class Args, class Visit>
void for_each_run_check_flag(Args& a, Visit&& visit) {
  visit("--async-save",
        "write each checkpoint's files on a background thread while training goes on (from a copy "
        "of the weights and optimizer state); the next save and the exit wait for it; it becomes "
        "visible only once complete, as a synchronous save",
        a.checks.async_save);
  visit("--no-save-optim",
        "save checkpoints without optimizer state (resuming from one needs --no-load-optim or "
        "--finetune)",
        a.checks.no_save_optim);
  visit("--exit-on-missing-checkpoint",
        "with --load: end with an error when it holds no checkpoint, instead of starting from "
        "scratch",
        a.checks.exit_on_missing_checkpoint);
  visit("--log-params-norm",
        "log the L2 norm of all parameters (params norm; params_norm in --log-json, params-norm in "
        "TensorBoard)",
        a.checks.log_params_norm);
  visit("--log-num-zeros-in-grad",
        "log the number of zero gradient elements (num zeros; num_zeros, num-zeros)",
        a.checks.log_num_zeros_in_grad);
  visit("--log-progress",
        "append Megatron's progress lines (job start, each checkpoint with throughput, "
        "floating-point operations and tokens) to progress.txt in --save",
        a.checks.log_progress);
  visit("--timing-log-level",
        "0: iteration time only; 1: also the forward-backward, all-grads-sync and optimizer times "
        "across ranks at each log line; 2: as 1 here",
        a.checks.timing_log_level);
  visit("--timing-log-option", "timers across ranks: max, minmax (default) or all",
        a.checks.timing_log_option);
  visit("--log-straggler",
        "at each log line: the slowest and fastest rank's step time and their spread",
        a.checks.log_straggler);
  visit("!--no-check-for-nan-in-loss-and-grad",
        "do not stop on a NaN/Inf loss or gradient norm (Megatron's default checks)",
        a.checks.check_for_nan_in_loss_and_grad);
  visit("--check-for-spiky-loss",
        "warn when an iteration's loss is >= 10x the largest of the first 100 (Megatron's rule)",
        a.checks.check_for_spiky_loss);
  visit("--rerun-mode",
        "disabled (default here), validate_results (re-run an iteration whose loss is NaN, Inf or "
        "spiky; reproduced: stop with exit code 17) or report_stats (re-run every iteration, log "
        "the differences)",
        a.checks.rerun_mode);
  visit("--deterministic-mode", "accepted: CPU runs are already bit-reproducible",
        a.checks.deterministic_mode);
}

}  // namespace mt
