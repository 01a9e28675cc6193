#include "train/data_loader.h"

#include "core/checked_math.h"
#include "core/error.h"
#include "parallel/context_parallel.h"

namespace mt {

DataLoader::DataLoader(const TrainArgs& args, int64_t dp_rank, int64_t cp_rank)
    : args_(args),
      dp_rank_(dp_rank),
      cp_rank_(cp_rank),
      vocab_size_(args.model.vocab_size),
      data_(args.data_path) {
  if (args.context_parallel_size > 1) {
    full_tokens_.resize(size_t(args.micro_batch_size * args.model.seq_length));
    full_labels_.resize(full_tokens_.size());
  }
  // Every token id checked once at start-up (a corrupt .bin fails here, with
  // the file, document, position and id, not when its sample is first read).
  if (vocab_size_ > 0) data_.validate_token_range(vocab_size_);
  const auto ranges = split_ranges(args.split, data_.num_sequences());
  MT_CHECK(ranges[0].present && ranges[0].size() > 0, "--split ", args.split, " leaves no ",
           "training documents out of ", data_.num_sequences(), "; fix: give the first weight > 0");
  train_docs_ = ranges[0].size();
  const int64_t g = args.global_batch_size;
  train_ = std::make_unique<GptDataset>(data_, ranges[0], args.model.seq_length,
                                        checked_mul(args.train_iters, g, "samples to train "
                                                    "(--train-iters x --global-batch-size)"),
                                        args.seed, "train");
  // Evaluated every --eval-interval, or once with --skip-train.
  const bool evaluate = args.eval_iters > 0 && (args.eval_interval > 0 || args.skip_train);
  auto held_out = [&](const SplitRange& range, const char* name) {
    return std::make_unique<GptDataset>(data_, range, args.model.seq_length,
                                        checked_mul(args.eval_iters, g, "samples to evaluate "
                                                    "(--eval-iters x --global-batch-size)"),
                                        args.seed, name);
  };
  if (evaluate && ranges[1].present && ranges[1].size() > 0) valid_ = held_out(ranges[1], "valid");
  if (evaluate && args.skip_train && ranges[2].present && ranges[2].size() > 0)
    test_ = held_out(ranges[2], "test");
}

MicroBatchRef DataLoader::fill(const GptDataset& ds, int64_t batch_index, int64_t k,
                               int32_t* tokens, int32_t* labels) const {
  const int64_t first = micro_batch_first_sample(batch_index, args_.global_batch_size,
                                                 args_.micro_batch_size, args_.dp_size, dp_rank_, k);
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

MicroBatchRef DataLoader::train_batch(int64_t iteration, int64_t k, int32_t* tokens,
                                      int32_t* labels) const {
  return fill(*train_, iteration - 1, k, tokens, labels);
}

MicroBatchRef DataLoader::valid_batch(int64_t eval_iter, int64_t k, int32_t* tokens,
                                      int32_t* labels) const {
  MT_CHECK(valid_ != nullptr, "no validation split (internal error)");
  return fill(*valid_, eval_iter, k, tokens, labels);
}

MicroBatchRef DataLoader::test_batch(int64_t eval_iter, int64_t k, int32_t* tokens,
                                     int32_t* labels) const {
  MT_CHECK(test_ != nullptr, "no test split (internal error)");
  return fill(*test_, eval_iter, k, tokens, labels);
}

}  // namespace mt
