#include "train/data_loader.h"

#include "core/checked_math.h"
#include "core/error.h"
#include "parallel/context_parallel.h"

namespace mt {

namespace {

DatasetBuilderConfig builder_config(const TrainArgs& args) {
  DatasetBuilderConfig c;
  if (!args.data_path.empty()) c.blend = parse_blend(args.data_path, "--data-path");
  const std::vector<std::string>* per_split[3] = {&args.train_data_path, &args.valid_data_path,
                                                  &args.test_data_path};
  for (int i = 0; i < 3; ++i)
    if (!per_split[i]->empty())
      c.blend_per_split[size_t(i)] =
          parse_blend(*per_split[i], std::string("--") + kSplitNames[i] + "-data-path");
  if (!args.split.empty() || args.mock_data) c.split = args.split;
  c.mock = args.mock_data;
  c.mock_vocab_size = args.model.vocab_size;  // the tokenizer's, before padding
  c.mock_eod = args.tokenizer_eod;
  c.seq_length = args.model.seq_length;
  c.seed = args.seed;
  c.mid_level_surplus = args.mid_level_dataset_surplus;
  c.vocab_size = args.model.vocab_size;
  const int64_t g = args.global_batch_size;
  // Evaluated every --eval-interval, or once with --skip-train.
  const bool evaluate = args.eval_iters > 0 && (args.eval_interval > 0 || args.skip_train);
  const int64_t eval_samples =
      evaluate ? checked_mul(args.eval_iters, g, "samples to evaluate (--eval-iters x "
                                                 "--global-batch-size)")
               : 0;
  c.sizes = {args.skip_train ? 0
                                             : args.batch_schedule().samples_after(args.train_iters),
             eval_samples, args.skip_train ? eval_samples : 0};
  return c;
}

}  // namespace

DataLoader::DataLoader(const TrainArgs& args, int64_t dp_rank, int64_t cp_rank,
                       const BlendIndexSource& blend_indices)
    : args_(args),
      dp_rank_(dp_rank),
      cp_rank_(cp_rank),
      vocab_size_(args.model.vocab_size),
      data_(build_dataset_splits(builder_config(args), blend_indices)) {
  if (args.context_parallel_size > 1) {
    full_tokens_.resize(size_t(args.micro_batch_size * args.model.seq_length));
    full_labels_.resize(full_tokens_.size());
  }
}

MicroBatchRef DataLoader::fill(const SampleDataset& ds, int64_t first_sample,
                               int64_t global_batch, int64_t k, int32_t* tokens,
                               int32_t* labels) const {
  const int64_t first = first_sample + micro_batch_first_sample(0, global_batch,
                                                                args_.micro_batch_size,
                                                                args_.dp_size, dp_rank_, k);
  const int64_t cp = args_.context_parallel_size, s = args_.model.seq_length;
  if (cp == 1) {
    fill_micro_batch(ds, first, args_.micro_batch_size, tokens, labels, vocab_size_);
    return {first};
  }
  fill_micro_batch(ds, first, args_.micro_batch_size, full_tokens_.data(), full_labels_.data(),
                   vocab_size_);
  for (int64_t bi = 0; bi < args_.micro_batch_size; ++bi) {
    cp_select_chunks(tokens + bi * (s / cp), full_tokens_.data() + bi * s, s, cp, cp_rank_);
    cp_select_chunks(labels + bi * (s / cp), full_labels_.data() + bi * s, s, cp, cp_rank_);
  }
  return {first};
}

MicroBatchRef DataLoader::train_batch(int64_t consumed_samples, int64_t global_batch, int64_t k,
                                      int32_t* tokens, int32_t* labels) const {
  MT_CHECK(data_.split[0] != nullptr, "no training split (internal error)");
  return fill(*data_.split[0], consumed_samples, global_batch, k, tokens, labels);
}

MicroBatchRef DataLoader::valid_batch(int64_t eval_iter, int64_t k, int32_t* tokens,
                                      int32_t* labels) const {
  MT_CHECK(has_valid(), "no validation split (internal error)");
  const int64_t g = args_.global_batch_size;
  return fill(*data_.split[1], eval_iter * g, g, k, tokens, labels);
}

MicroBatchRef DataLoader::test_batch(int64_t eval_iter, int64_t k, int32_t* tokens,
                                     int32_t* labels) const {
  MT_CHECK(has_test(), "no test split (internal error)");
  const int64_t g = args_.global_batch_size;
  return fill(*data_.split[2], eval_iter * g, g, k, tokens, labels);
}

}  // namespace mt
