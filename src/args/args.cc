#include "args/args.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "backend/device.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "data/blend.h"
#include "data/gpt_dataset.h"
#include "data/tokenizer.h"
#include "model/params.h"

namespace mt {

LrSchedule TrainArgs::lr_schedule() const {
  LrSchedule s;
  s.max_lr = lr;
  s.min_lr = min_lr;
  if (train_samples > 0) {  // Megatron's samples, in iterations of the global batch
    const double g = double(lr_batch());
    s.decay_iters = double(lr_decay_samples > 0 ? lr_decay_samples : train_samples) / g;
    s.warmup_iters = double(lr_warmup_samples) / g;
    s.wsd_decay_iters = double(lr_wsd_decay_samples) / g;
  } else {
    s.decay_iters = double(lr_decay_iters > 0 ? lr_decay_iters : train_iters);
    s.warmup_iters = double(lr_warmup_iters);
    s.wsd_decay_iters = double(lr_wsd_decay_iters);
  }
  if (lr_warmup_fraction >= 0) s.warmup_iters = lr_warmup_fraction * s.decay_iters;
  s.style = parse_lr_decay_style(lr_decay_style);
  s.wsd_style = parse_wsd_decay_style(lr_wsd_decay_style);
  return s;
}

StageLayout TrainArgs::stage_layout(int tp_rank, int tp_size, int pp_rank, int pp_size,
                                    int ep_rank) const {
  StageLayout st;
  st.tp_rank = tp_rank;
  st.tp_size = tp_size;
  st.ep_rank = ep_rank;
  st.ep_size = expert_model_parallel_size;
  std::tie(st.layer_begin, st.layer_end) =
      stage_layer_range(model.num_layers, pp_size, pp_rank, decoder_first_pipeline_num_layers,
                        decoder_last_pipeline_num_layers);
  st.has_embedding = pp_rank == 0;
  st.has_output = pp_rank == pp_size - 1;
  if (virtual_stages() > 1)
    st.chunks = virtual_stage_chunks(model.num_layers, pp_size, pp_rank, virtual_stages());
  return st;
}

namespace {

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

}  // namespace

void TrainArgs::check_flag_ranges() const {
  model.check_flag_ranges();
  MT_CHECK(tensor_model_parallel_size >= 1, "--tensor-model-parallel-size ",
           tensor_model_parallel_size, " must be >= 1");
  MT_CHECK(pipeline_model_parallel_size >= 1, "--pipeline-model-parallel-size ",
           pipeline_model_parallel_size, " must be >= 1");
  MT_CHECK(context_parallel_size >= 1, "--context-parallel-size ", context_parallel_size,
           " must be >= 1");
  MT_CHECK(num_layers_per_virtual_pipeline_stage >= 0, "--num-layers-per-virtual-pipeline-stage ",
           num_layers_per_virtual_pipeline_stage, " must be > 0 (or left out: no interleaving)");
  MT_CHECK(decoder_first_pipeline_num_layers >= 0, "--decoder-first-pipeline-num-layers ",
           decoder_first_pipeline_num_layers, " must be >= 0");
  MT_CHECK(decoder_last_pipeline_num_layers >= 0, "--decoder-last-pipeline-num-layers ",
           decoder_last_pipeline_num_layers, " must be >= 0");
  MT_CHECK(ddp_bucket_size >= 0, "--ddp-bucket-size ", ddp_bucket_size,
           " must be > 0 elements (or left out: 1M)");
  MT_CHECK(recompute_num_layers >= 0, "--recompute-num-layers ", recompute_num_layers,
           " must be >= 1");
  MT_CHECK(micro_batch_size > 0, "--micro-batch-size ", micro_batch_size, " must be > 0");
  MT_CHECK(global_batch_size >= 0, "--global-batch-size ", global_batch_size,
           " must be > 0 (or left out: micro-batch size x DP)");
  MT_CHECK(train_iters >= 0, "--train-iters ", train_iters, " must be > 0");
  for (const auto& [flag, v] : {std::pair<const char*, int64_t>{"--train-samples", train_samples},
                                {"--lr-decay-samples", lr_decay_samples},
                                {"--lr-warmup-samples", lr_warmup_samples},
                                {"--lr-wsd-decay-samples", lr_wsd_decay_samples}})
    MT_CHECK(v >= 0, flag, " ", v, " must be >= 0");
  MT_CHECK(finite_at_least(lr, 0), "--lr ", lr, " must be a finite number >= 0");
  MT_CHECK(finite_at_least(min_lr, 0), "--min-lr ", min_lr, " must be a finite number >= 0");
  MT_CHECK(lr_warmup_iters >= 0, "--lr-warmup-iters ", lr_warmup_iters, " must be >= 0");
  MT_CHECK(lr_warmup_fraction == -1 || (lr_warmup_fraction >= 0 && lr_warmup_fraction <= 1),
           "--lr-warmup-fraction ", lr_warmup_fraction, " must be in [0, 1]");
  MT_CHECK(lr_decay_iters >= 0, "--lr-decay-iters ", lr_decay_iters,
           " must be > 0 (or left out: --train-iters)");
  MT_CHECK(lr_wsd_decay_iters >= 0, "--lr-wsd-decay-iters ", lr_wsd_decay_iters, " must be >= 0");
  MT_CHECK(finite_at_least(optim.weight_decay, 0), "--weight-decay ", optim.weight_decay,
           " must be a finite number >= 0");
  MT_CHECK(optim.beta1 >= 0 && optim.beta1 < 1, "--adam-beta1 ", optim.beta1,
           " must be in [0, 1) (e.g. 0.9)");
  MT_CHECK(optim.beta2 >= 0 && optim.beta2 < 1, "--adam-beta2 ", optim.beta2,
           " must be in [0, 1) (e.g. 0.999)");
  MT_CHECK(std::isfinite(optim.eps) && optim.eps > 0, "--adam-eps ", optim.eps,
           " must be a finite number > 0 (e.g. 1e-8)");
  MT_CHECK(finite_at_least(optim.clip_grad, 0), "--clip-grad ", optim.clip_grad,
           " must be a finite number >= 0 (0: off)");
  MT_CHECK(vocab_size >= 0 && vocab_size < (int64_t(1) << 31) - 1, "--vocab-size ", vocab_size,
           " must be in [1, 2^31 - 2] (token ids are int32)");
  MT_CHECK(log_interval > 0, "--log-interval ", log_interval, " must be > 0");
  MT_CHECK(tensorboard_log_interval > 0, "--tensorboard-log-interval ", tensorboard_log_interval,
           " must be > 0");
  MT_CHECK(tensorboard_queue_size > 0, "--tensorboard-queue-size ", tensorboard_queue_size,
           " must be > 0");
  MT_CHECK(eval_interval >= 0, "--eval-interval ", eval_interval, " must be >= 0 (0: off)");
  MT_CHECK(eval_iters >= 0, "--eval-iters ", eval_iters, " must be >= 0");
  MT_CHECK(finite_at_least(peak_tflops, 0), "--peak-tflops ", peak_tflops,
           " must be a finite number >= 0 (0: measure)");
  MT_CHECK(save_interval >= 0, "--save-interval ", save_interval, " must be >= 0 (0: off)");
  MT_CHECK(exit_interval >= 0, "--exit-interval ", exit_interval, " must be >= 0 (0: off)");
  MT_CHECK(finite_at_least(distributed_timeout_minutes, 0), "--distributed-timeout-minutes ",
           distributed_timeout_minutes, " must be a finite number >= 0 (0: wait forever)");
  MT_CHECK(finite_at_least(exit_duration_in_mins, 0), "--exit-duration-in-mins ",
           exit_duration_in_mins, " must be a finite number >= 0 (0: off)");
  MT_CHECK(std::isfinite(loss_scale) && loss_scale >= 0 && std::isfinite(initial_loss_scale) &&
               initial_loss_scale > 0 && std::isfinite(min_loss_scale) && min_loss_scale > 0 &&
               loss_scale_window > 0 && hysteresis > 0,
           "loss scaling: --loss-scale ", loss_scale, " must be >= 0, --initial-loss-scale ",
           initial_loss_scale, " and --min-loss-scale ", min_loss_scale,
           " > 0, --loss-scale-window ", loss_scale_window, " and --hysteresis ", hysteresis,
           " >= 1");
}

// The sizes the model's flags multiply into (parameter count, one
// micro-batch's layer inputs) in checked arithmetic: an absurd flag fails here
// naming the flags instead of overflowing later. Whether the model fits the
// host is decided with the full memory prediction (memory/host_memory.h).
void TrainArgs::check_size_arithmetic() const {
  const ModelConfig& m = model;
  const int64_t ffn = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : 4 * m.hidden_size;
  const int64_t vocab = tokenizer_type == "NullTokenizer" ? vocab_size + 1 : 0;
  checked_add(parameters_without_vocab(m, ffn),
              checked_mul(vocab, m.hidden_size, "word embedding (--vocab-size x --hidden-size)"),
              "parameter count");
  constexpr const char* act = "activations (--micro-batch-size x --seq-length x --hidden-size x "
                              "--num-layers)";
  checked_mul(checked_mul(checked_mul(micro_batch_size, m.seq_length, act), m.hidden_size, act),
              checked_mul(m.num_layers, 4 * int64_t(sizeof(float)), act), act);
}

// Megatron's blend flags (BlendedMegatronDatasetConfig's checks): --data-path
// (cut by --split) or a blend per split, never both; each list parses.
void TrainArgs::check_data_flags() const {
  const bool per_split =
      !train_data_path.empty() || !valid_data_path.empty() || !test_data_path.empty();
  MT_CHECK(!(per_split && !data_path.empty()), "--data-path and --train-data-path / "
           "--valid-data-path / --test-data-path are both given; fix: use one (--data-path is cut "
           "by --split, the others are used whole)");
  MT_CHECK(!per_split || split.empty(), "--split ", split, " cuts --data-path only; with "
           "--train-data-path / --valid-data-path / --test-data-path each dataset is used whole; "
           "fix: drop --split");
  MT_CHECK(!mock_data || (!per_split && data_path.empty()), "--mock-data and --",
           per_split ? "train/valid/test-data-path" : "data-path", " are both given: "
           "Megatron-LM takes a single data source; fix: drop --mock-data or the data path");
  MT_CHECK(!program_train_data || train_data_path.empty(), "--train-data-path and the "
           "program's megatron::DataSource both give the training split; fix: drop "
           "--train-data-path (--valid-data-path / --test-data-path may stay)");
  MT_CHECK(mock_data || per_split || !data_path.empty() || program_train_data, "--data-path is required (the prefix of a .bin/.idx "
           "pair, e.g. data/corpus_text_document, or a blend: 0.3 data/a_text_document 0.7 "
           "data/b_text_document); fix: run `megatron preprocess` first, or train on --mock-data");
  MT_CHECK(!per_split || !train_data_path.empty() || skip_train || program_train_data,
           "--valid-data-path / "
           "--test-data-path without --train-data-path; fix: add --train-data-path (or use "
           "--data-path with --split)");
  MT_CHECK(std::isfinite(mid_level_dataset_surplus) && mid_level_dataset_surplus >= 0,
           "--mid-level-dataset-surplus ", mid_level_dataset_surplus, " must be >= 0 (Megatron's "
           "default: 0.005)");
  if (!split.empty()) parse_and_normalize_split(split);  // refused here, before any work
  if (!data_path.empty()) parse_blend(data_path, "--data-path");
  if (!train_data_path.empty()) parse_blend(train_data_path, "--train-data-path");
  if (!valid_data_path.empty()) parse_blend(valid_data_path, "--valid-data-path");
  if (!test_data_path.empty()) parse_blend(test_data_path, "--test-data-path");
}

// Megatron's validate_args: a run is iteration-based (--train-iters, with
// --lr-decay-iters, --lr-warmup-iters, --lr-wsd-decay-iters) or sample-based
// (--train-samples, with the *-samples flags), never a mix; a warm-up is a
// fraction or a length, not both.
void TrainArgs::check_iterations_or_samples() const {
  MT_CHECK(train_iters > 0 || train_samples > 0, "neither --train-iters nor --train-samples is "
           "given; fix: pass --train-iters N (or Megatron's sample-based --train-samples N)");
  const char* mode =
      train_iters > 0 ? "an iteration-based (--train-iters)" : "a sample-based (--train-samples)";
  const std::pair<const char*, int64_t> other[] = {
      {"--train-samples", train_iters > 0 ? train_samples : 0},
      {"--lr-decay-samples", train_iters > 0 ? lr_decay_samples : 0},
      {"--lr-warmup-samples", train_iters > 0 ? lr_warmup_samples : 0},
      {"--lr-wsd-decay-samples", train_iters > 0 ? lr_wsd_decay_samples : 0},
      {"--lr-decay-iters", train_samples > 0 ? lr_decay_iters : 0},
      {"--lr-warmup-iters", train_samples > 0 ? lr_warmup_iters : 0},
      {"--lr-wsd-decay-iters", train_samples > 0 ? lr_wsd_decay_iters : 0}};
  for (const auto& [flag, v] : other)
    MT_CHECK(v == 0, flag, " ", v, " in ", mode, " run: Megatron-LM refuses mixing iteration- "
             "and sample-based flags; fix: give the schedule in ",
             train_iters > 0 ? "iterations (--lr-decay-iters, --lr-warmup-iters, "
                               "--lr-wsd-decay-iters)"
                             : "samples (--lr-decay-samples, --lr-warmup-samples, "
                               "--lr-wsd-decay-samples)");
  MT_CHECK(rampup_batch_size.empty() || train_iters == 0, "--rampup-batch-size in an "
           "iteration-based (--train-iters) run: Megatron-LM ramps the batch up over samples "
           "only; fix: give --train-samples N (and the schedule in samples) instead of "
           "--train-iters");
  MT_CHECK(lr_warmup_fraction < 0 || (lr_warmup_iters == 0 && lr_warmup_samples == 0),
           "--lr-warmup-fraction and --lr-warmup-", lr_warmup_samples > 0 ? "samples" : "iters",
           " are both set; use one");
}

std::vector<std::string> TrainArgs::dataset_prefixes() const {
  std::vector<std::string> out;
  const std::pair<const std::vector<std::string>*, const char*> lists[] = {
      {&data_path, "--data-path"},
      {&train_data_path, "--train-data-path"},
      {&valid_data_path, "--valid-data-path"},
      {&test_data_path, "--test-data-path"}};
  for (const auto& [words, flag] : lists)
    if (!words->empty())
      for (const std::string& p : parse_blend(*words, flag).prefixes)
        if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

std::string TrainArgs::disable_sequence_parallel_without_tp() {
  if (!sequence_parallel || tensor_model_parallel_size != 1) return "";
  sequence_parallel = false;
  return "--sequence-parallel with --tensor-model-parallel-size 1: sequence parallelism is off "
         "(it splits the tensor-parallel layers' activations, and TP 1 has none to split); "
         "training as without it, as Megatron-LM does";
}

void TrainArgs::validate_fsdp(int world_size) const {
  const std::string& s = data_parallel_sharding_strategy;
  MT_CHECK(s == "no_shard" || s == "optim" || s == "optim_grads" || s == "optim_grads_params",
           "--data-parallel-sharding-strategy '", s, "' is not one of no_shard, optim, "
           "optim_grads, optim_grads_params");
  if (!shard_grads()) return;  // Megatron reads the strategy only with FSDP
  MT_CHECK(device == "cpu", "--data-parallel-sharding-strategy ", s, " on --device ", device,
           " is not implemented yet; fix: --data-parallel-sharding-strategy optim (the "
           "distributed optimizer)");
  const int64_t dp_cp = world_size / (int64_t(tensor_model_parallel_size) *
                                      pipeline_model_parallel_size);
  MT_CHECK(!shard_params() || dp_cp > 1, "--data-parallel-sharding-strategy optim_grads_params "
           "without data parallelism (DP x CP = ", dp_cp, " on ", world_size, " ranks: nothing to "
           "shard the weights over); fix: launch more ranks, or drop --use-megatron-fsdp");
}

std::string TrainArgs::expert_tensor_parallel_default() const {
  if (!model.moe() || tensor_model_parallel_size == 1 || expert_tensor_parallel_size != 0)
    return "";
  return "--expert-tensor-parallel-size not given: each expert is whole on its rank (expert TP "
         "1), where Megatron-LM's default splits experts over the " +
         std::to_string(tensor_model_parallel_size) + " TP ranks (expert TP = TP), which this "
         "build does not implement; the losses are the same, an expert's weights take TP times "
         "Megatron's memory per rank (pass --expert-tensor-parallel-size 1 to silence this)";
}

std::string TrainArgs::capacity_factor_note() const {
  const float cf = model.moe_expert_capacity_factor;
  const bool given = std::find(model_flags_given.begin(), model_flags_given.end(),
                               "moe_expert_capacity_factor") != model_flags_given.end();
  if (!model.moe() || !given || !(cf < 0)) return "";
  std::ostringstream os;
  os << "--moe-expert-capacity-factor " << cf << " is negative: no expert capacity, every token "
     << "reaches its top-k experts (dropless routing), as Megatron-LM reads a negative factor "
     << "(None); leave the flag out to say so, or give a factor > 0 (e.g. 1.0) to cap the experts";
  return os.str();
}

void TrainArgs::validate_moe(int world_size) const {
  const int64_t ep = expert_model_parallel_size;
  MT_CHECK(ep >= 1, "--expert-model-parallel-size ", ep, " must be >= 1; fix: leave it out (1: "
           "no expert parallelism) or give a size that divides --num-experts");
  MT_CHECK(expert_tensor_parallel_size <= 1, "--expert-tensor-parallel-size ",
           expert_tensor_parallel_size, " is not implemented (experts are whole on their rank); "
           "fix: pass --expert-tensor-parallel-size 1");
  MT_CHECK(expert_tensor_parallel_size >= 0, "--expert-tensor-parallel-size ",
           expert_tensor_parallel_size, " must be >= 1");
  if (!model.moe()) {
    MT_CHECK(ep == 1, "--expert-model-parallel-size ", ep, " without --num-experts; fix: add "
             "--num-experts N (a multiple of ", ep, ") or drop the flag");
    return;
  }
  MT_CHECK(model.num_experts % ep == 0, "--num-experts ", model.num_experts,
           " is not divisible by --expert-model-parallel-size ", ep,
           "; fix: choose EP dividing the experts");
  const int64_t stage = world_size / (int64_t(pipeline_model_parallel_size));
  MT_CHECK(stage % ep == 0, "--expert-model-parallel-size ", ep, " does not divide the ", stage,
           " ranks of a pipeline stage (TP x CP x DP); fix: choose EP dividing them");
  MT_CHECK(tensor_model_parallel_size == 1 || sequence_parallel,
           "--num-experts with --tensor-model-parallel-size ", tensor_model_parallel_size,
           " needs --sequence-parallel (as in Megatron-LM); fix: add --sequence-parallel");
  MT_CHECK(!model.moe_router_enable_expert_bias || !shard_params(),
           "--moe-router-enable-expert-bias with --data-parallel-sharding-strategy "
           "optim_grads_params is not implemented (the bias is updated in the model's whole "
           "weights); fix: shard less (optim_grads), or drop the bias");
  MT_CHECK(!model.moe_grouped_gemm || model.disable_bias_linear,
           "--moe-grouped-gemm with expert biases is not implemented; fix: add "
           "--disable-bias-linear, or drop --moe-grouped-gemm");
}

// Megatron core's get_num_layers_to_build: (L + embedding + loss) / PP
// layers per stage, the first (last) stage holding one fewer for the
// embedding (loss). Layers only move between stages: the numbers stay.
void TrainArgs::account_in_pipeline_split() {
  const bool emb = account_for_embedding_in_pipeline_split;
  const bool loss = account_for_loss_in_pipeline_split;
  const int64_t pp = pipeline_model_parallel_size;
  if ((!emb && !loss) || pipeline_split_accounted) return;
  const int64_t total = model.num_layers + (emb ? 1 : 0) + (loss ? 1 : 0);
  MT_CHECK(total % pp == 0, "--num-layers ", model.num_layers, emb ? " + 1 (embedding)" : "",
           loss ? " + 1 (loss)" : "", " = ", total, " is not divisible by "
           "--pipeline-model-parallel-size ", pp, " (as Megatron-LM refuses); fix: a layer "
           "count that makes it divide");
  if (pp == 1) return;
  MT_CHECK(decoder_first_pipeline_num_layers == 0 && decoder_last_pipeline_num_layers == 0 &&
               num_layers_per_virtual_pipeline_stage == 0,
           "--account-for-", emb ? "embedding" : "loss", "-in-pipeline-split with "
           "--decoder-first/last-pipeline-num-layers or virtual stages is not built; fix: give "
           "one way of splitting the layers");
  const int64_t per = total / pp;
  MT_CHECK(per - (emb ? 1 : 0) > 0 && per - (loss ? 1 : 0) > 0, "--account-for-*-in-pipeline-"
           "split leaves a pipeline stage without layers (", total, " / PP ", pp,
           " = ", per, " per stage); fix: more layers or a smaller PP");
  decoder_first_pipeline_num_layers = per - (emb ? 1 : 0);
  decoder_last_pipeline_num_layers = per - (loss ? 1 : 0);
  pipeline_split_accounted = true;
}

void TrainArgs::validate(int world_size) {
  check_flag_ranges();
  account_in_pipeline_split();
  check_iterations_or_samples();
  validate_run_checks(checks, !save.empty(), device);
  const int64_t tp = tensor_model_parallel_size, pp = pipeline_model_parallel_size;
  const int64_t cp = context_parallel_size;
  if (cp == 1)
    MT_CHECK(world_size % (tp * pp) == 0, "world size ", world_size,
             " is not divisible by TP ", tp, " x PP ", pp, " = ", tp * pp,
             "; fix: launch a multiple of ", tp * pp, " ranks or change the sizes");
  else
    MT_CHECK(world_size % (tp * pp * cp) == 0, "world size ", world_size,
             " is not divisible by TP ", tp, " x PP ", pp, " x CP ", cp, " = ", tp * pp * cp,
             "; fix: launch a multiple of ", tp * pp * cp, " ranks or change the sizes");
  validate_moe(world_size);
  // Context parallelism cuts the sequence into 2·CP equal chunks (rank i
  // holds chunks i and 2·CP-1-i); with SP each rank's s/CP rows split over TP.
  MT_CHECK(cp == 1 || model.seq_length % (2 * cp) == 0, "--seq-length ", model.seq_length,
           " is not divisible by 2 x --context-parallel-size ", cp, " = ", 2 * cp,
           "; fix: choose a sequence length that is a multiple of ", 2 * cp);
  if (decoder_first_pipeline_num_layers == 0 && decoder_last_pipeline_num_layers == 0)
    MT_CHECK(model.num_layers % pp == 0, "--num-layers ", model.num_layers,
             " is not divisible by --pipeline-model-parallel-size ", pp,
             "; fix: choose a PP size that divides the layers, or set "
             "--decoder-first/last-pipeline-num-layers");
  stage_layer_range(model.num_layers, int(pp), 0, decoder_first_pipeline_num_layers,
                    decoder_last_pipeline_num_layers);  // throws if they do not fit
  if (num_layers_per_virtual_pipeline_stage > 0) {
    const int64_t k = num_layers_per_virtual_pipeline_stage;
    MT_CHECK(pp > 1, "--num-layers-per-virtual-pipeline-stage needs "
             "--pipeline-model-parallel-size > 1; got PP ", pp);
    checked_mul(pp, k, "PP x --num-layers-per-virtual-pipeline-stage");
    MT_CHECK(model.num_layers % (pp * k) == 0, "--num-layers ", model.num_layers,
             " is not divisible by PP ", pp, " x --num-layers-per-virtual-pipeline-stage ", k);
    MT_CHECK(model.num_layers / (pp * k) > 1, "--num-layers-per-virtual-pipeline-stage ", k,
             " gives one model chunk per rank (", model.num_layers, " layers / PP ", pp,
             "); fix: lower it, or drop it for plain 1F1B");
    MT_CHECK(decoder_first_pipeline_num_layers == 0 && decoder_last_pipeline_num_layers == 0,
             "--decoder-first/last-pipeline-num-layers do not combine with virtual stages");
  }
  MT_CHECK(!sequence_parallel || tp > 1, "--sequence-parallel with TP 1 (internal error: "
           "disable_sequence_parallel_without_tp() switches it off before validate)");
  dp_size = world_size / (tp * pp * cp);
  MT_CHECK(model.num_attention_heads % tp == 0, "--num-attention-heads ",
           model.num_attention_heads, " is not divisible by TP ", tp,
           "; fix: choose a TP size that divides the heads");
  // Megatron core splits the key/value heads (query groups) over TP too; a
  // group count below TP (replicated key/value heads) is not supported.
  MT_CHECK(!model.group_query_attention || model.num_query_groups % tp == 0,
           "--num-query-groups ", model.num_query_groups, " is not divisible by TP ", tp,
           "; fix: choose a TP size that divides the query groups (groups below TP, with "
           "replicated key/value heads, are not supported)");
  const int64_t ffn = model.ffn_hidden_size > 0 ? model.ffn_hidden_size : 4 * model.hidden_size;
  MT_CHECK(ffn % tp == 0, "--ffn-hidden-size ", ffn, " is not divisible by TP ", tp,
           "; fix: choose a TP size that divides it");
  MT_CHECK(!sequence_parallel || model.seq_length % tp == 0, "--seq-length ", model.seq_length,
           " is not divisible by TP ", tp, " (needed by --sequence-parallel)");
  MT_CHECK(!sequence_parallel || cp == 1 || (model.seq_length / cp) % tp == 0, "--seq-length ",
           model.seq_length, " / CP ", cp, " = ", model.seq_length / cp,
           " rows per context-parallel rank are not divisible by TP ", tp,
           " (needed by --sequence-parallel); fix: a sequence length that is a multiple of ",
           2 * cp * tp);

  const int64_t per_step = checked_mul(micro_batch_size, dp_size, "--micro-batch-size x DP");
  if (!step_batch_size_schedule.empty()) {
    MT_CHECK(global_batch_size == 0, "--step-batch-size-schedule with --global-batch-size ",
             global_batch_size, ": Megatron-LM refuses both (\"Cannot specify both\"); fix: "
             "leave out --global-batch-size (the schedule's batches are the global batches)");
    MT_CHECK(rampup_batch_size.empty(), "--step-batch-size-schedule with --rampup-batch-size: "
             "two batch schedules; fix: give one (--step-batch-size-schedule replaces the ramp-up)");
    for (const BatchStep& st : batch_schedule().steps)
      global_batch_size = std::max(global_batch_size, st.batch);
  }
  if (global_batch_size == 0) global_batch_size = per_step;
  if (train_samples > 0) {  // Megatron's update_train_iters
    batch_schedule().validate();
    train_iters = batch_schedule().iterations_for_samples(train_samples);
    MT_CHECK(train_iters > 0, "--train-samples ", train_samples, " is less than one global batch (",
             global_batch_size, " sequences); fix: --train-samples >= ", global_batch_size);
  }
  MT_CHECK(global_batch_size % (micro_batch_size * dp_size) == 0, "--global-batch-size ",
           global_batch_size, " is not divisible by --micro-batch-size ", micro_batch_size,
           " x DP ", dp_size, " = ", micro_batch_size * dp_size,
           "; fix: make the global batch a multiple of micro-batch x data-parallel size");
  validate_batch_rampup();
  // Samples and tokens of the whole run must fit int64 (the data loader's indices).
  const int64_t samples = batch_schedule().samples_after(train_iters);
  checked_mul(samples, checked_add(model.seq_length, 1, "--seq-length + 1"),
              "tokens to train (--train-iters x --global-batch-size x --seq-length)");
  checked_mul(eval_iters, global_batch_size,
              "samples to evaluate (--eval-iters x --global-batch-size)");
  validate_recompute();
  MT_CHECK(num_layers_per_virtual_pipeline_stage == 0 || num_micro_batches() % pp == 0,
           "the interleaved schedule needs the micro-batches per step (", num_micro_batches(),
           ") to be divisible by PP ", pp, "; fix: change --global-batch-size");
  MT_CHECK(save_interval == 0 || !save.empty(), "--save-interval ", save_interval,
           " needs --save DIR");
  check_data_flags();
  const std::vector<std::string>& types = tokenizer_types();
  std::string known;
  for (const std::string& t : types) known += (known.empty() ? "" : ", ") + t;
  MT_CHECK(tokenizer_type.empty() || std::find(types.begin(), types.end(), tokenizer_type) != types.end(),
           "--tokenizer-type '", tokenizer_type, "' is not supported; use one of ", known);
  MT_CHECK(tokenizer_type != "NullTokenizer" || vocab_size > 0,
           "--tokenizer-type NullTokenizer needs --vocab-size N");
  MT_CHECK(!(bf16 && fp16), "--bf16 and --fp16 are both set; choose one");
  parse_device(device);  // "cpu" or "cuda"; whether cuda can run is checked at start-up
  MT_CHECK(!grad_reduce_in_bf16 || bf16,
           "--grad-reduce-in-bf16 needs --bf16 (it rounds a bf16 run's gradients for the "
           "data-parallel reduction); fix: add --bf16 or drop --grad-reduce-in-bf16");
  MT_CHECK(!overlap_param_gather || shard_optimizer(),
           "--overlap-param-gather needs --use-distributed-optimizer (it overlaps the all-gather "
           "of the updated parameter shards)");
  validate_fsdp(world_size);
  lr_schedule().validate();
  validate_optimizer_args(*this);
  check_size_arithmetic();
}

}  // namespace mt
