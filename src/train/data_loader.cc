#include "train/data_loader.h"

#include <algorithm>
#include <utility>

#include "core/checked_math.h"
#include "core/error.h"
#include "data/document_masks.h"
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
  c.sizes = {args.skip_train || args.program_train_data
                 ? 0
                 : args.batch_schedule().samples_after(args.train_iters),
             eval_samples, args.skip_train ? eval_samples : 0};
  return c;
}

// The splits the flags give; none when the program supplies the training
// samples and no data flag was given.
DatasetSplits flag_splits(const TrainArgs& args, const BlendIndexSource& blend_indices) {
  const bool flags = args.mock_data || !args.data_path.empty() || !args.train_data_path.empty() ||
                     !args.valid_data_path.empty() || !args.test_data_path.empty();
  if (!flags && args.program_train_data) return {};
  return build_dataset_splits(builder_config(args), blend_indices);
}

}  // namespace

DataLoader::DataLoader(const TrainArgs& args, int64_t dp_rank, int64_t cp_rank,
                       const BlendIndexSource& blend_indices,
                       std::shared_ptr<const SampleDataset> program_train)
    : args_(args),
      dp_rank_(dp_rank),
      cp_rank_(cp_rank),
      vocab_size_(args.model.vocab_size),
      data_(flag_splits(args, blend_indices)),
      program_train_(std::move(program_train)),
      train_(program_train_ ? program_train_.get() : data_.split[0].get()) {
  const int64_t s = args.model.seq_length;
  MT_CHECK(!args.program_train_data || program_train_ != nullptr,
           "no training samples: the program said it supplies them but gave none (internal error)");
  if (program_train_ != nullptr && !args.skip_train) {
    MT_CHECK(program_train_->seq_length() == s, "the program's megatron::DataSource serves "
             "samples of ", program_train_->seq_length(), " + 1 tokens, but the run's sequence "
             "length is ", s, "; fix: serve --seq-length + 1 tokens per sample");
    const int64_t needed = args.batch_schedule().samples_after(args.train_iters);
    MT_CHECK(program_train_->size() >= needed, "the program's megatron::DataSource holds ",
             program_train_->size(), " samples, but the run reads ", needed,
             " (--train-iters x the global batch); fix: a larger DataSource, or fewer "
             "--train-iters");
  }
  if (args.context_parallel_size > 1 || args.documents.any()) {
    full_tokens_.resize(size_t(args.micro_batch_size * s));
    full_labels_.resize(full_tokens_.size());
  }
  if (args.documents.any()) {
    sample_positions_.resize(size_t(s));
    sample_mask_.resize(size_t(s));
  }
}

void DataLoader::fill(const SampleDataset& ds, int64_t first_sample, int64_t global_batch,
                      int64_t k, MicroBatchInput& mb) const {
  const int64_t first = first_sample + micro_batch_first_sample(0, global_batch,
                                                                args_.micro_batch_size,
                                                                args_.dp_size, dp_rank_, k);
  const int64_t cp = args_.context_parallel_size, s = args_.model.seq_length;
  const int64_t b = args_.micro_batch_size;
  mb.first_sample = first;
  const DocumentFlags& docs = args_.documents;
  if (cp == 1 && !docs.any()) {
    fill_micro_batch(ds, first, b, mb.tokens.data(), mb.labels.data(), vocab_size_);
    mb.loss_tokens = b * s;
    return;
  }
  fill_micro_batch(ds, first, b, full_tokens_.data(), full_labels_.data(), vocab_size_);
  for (int64_t bi = 0; bi < b; ++bi) {
    cp_select_chunks(mb.tokens.data() + bi * (s / cp), full_tokens_.data() + bi * s, s, cp,
                     cp_rank_);
    cp_select_chunks(mb.labels.data() + bi * (s / cp), full_labels_.data() + bi * s, s, cp,
                     cp_rank_);
  }
  mb.loss_tokens = b * s;
  const bool mtp = args_.model.mtp() && cp > 1;  // MTP reads past this rank's chunks
  if (mtp) {
    mb.sample_tokens = full_tokens_;
    mb.sample_labels = full_labels_;
  }
  if (!docs.any()) return;
  if (mtp && docs.eod_mask_loss) mb.sample_loss_mask.resize(size_t(b * s));
  // The documents of each whole sample; this rank keeps its chunks' positions
  // and mask, and every query's first visible key by global position.
  mb.positions.resize(docs.reset_position_ids ? size_t(b * s / cp) : 0);
  mb.doc_start.resize(docs.reset_attention_mask ? size_t(b * s) : 0);
  mb.loss_mask.resize(docs.eod_mask_loss ? size_t(b * s / cp) : 0);
  std::vector<int32_t> starts;  // a sample's, when not kept
  if (!docs.reset_attention_mask) starts.resize(size_t(s));
  mb.loss_tokens = 0;
  for (int64_t bi = 0; bi < b; ++bi) {
    int32_t* start = docs.reset_attention_mask ? mb.doc_start.data() + bi * s : starts.data();
    mb.loss_tokens += document_masks(full_tokens_.data() + bi * s, s, docs,
                                     sample_positions_.data(), start, sample_mask_.data());
    if (docs.reset_position_ids)
      cp_select_chunks(mb.positions.data() + bi * (s / cp), sample_positions_.data(), s, cp,
                       cp_rank_);
    if (docs.eod_mask_loss)
      cp_select_chunks(mb.loss_mask.data() + bi * (s / cp), sample_mask_.data(), s, cp,
                       cp_rank_);
    if (!mb.sample_loss_mask.empty())
      std::copy(sample_mask_.begin(), sample_mask_.end(), mb.sample_loss_mask.begin() + bi * s);
  }
}

int64_t DataLoader::loss_tokens(const SampleDataset& ds, int64_t first_sample,
                                int64_t samples) const {
  const int64_t s = args_.model.seq_length;
  if (!args_.documents.eod_mask_loss) return samples * s;
  std::vector<int32_t> tokens(static_cast<size_t>(s));
  int64_t counted = 0;
  for (int64_t i = first_sample; i < first_sample + samples; ++i) {
    ds.read_sample(i, 0, s, tokens.data());
    for (int32_t t : tokens) counted += t != args_.documents.eod;
  }
  return counted;
}

void DataLoader::train_batch(int64_t consumed_samples, int64_t global_batch, int64_t k,
                             MicroBatchInput& mb) const {
  MT_CHECK(train_ != nullptr, "no training split (internal error)");
  fill(*train_, consumed_samples, global_batch, k, mb);
}

void DataLoader::valid_batch(int64_t eval_iter, int64_t k, MicroBatchInput& mb) const {
  MT_CHECK(has_valid(), "no validation split (internal error)");
  const int64_t g = args_.global_batch_size;
  fill(*data_.split[1], eval_iter * g, g, k, mb);
}

void DataLoader::test_batch(int64_t eval_iter, int64_t k, MicroBatchInput& mb) const {
  MT_CHECK(has_test(), "no test split (internal error)");
  const int64_t g = args_.global_batch_size;
  fill(*data_.split[2], eval_iter * g, g, k, mb);
}

int64_t DataLoader::train_loss_tokens(int64_t consumed_samples, int64_t global_batch) const {
  MT_CHECK(train_ != nullptr, "no training split (internal error)");
  return loss_tokens(*train_, consumed_samples, global_batch);
}

int64_t DataLoader::eval_loss_tokens(bool test) const {
  const SampleDataset* ds = data_.split[test ? 2 : 1].get();
  MT_CHECK(ds != nullptr, "no ", test ? "test" : "validation", " split (internal error)");
  const int64_t g = args_.global_batch_size;
  return loss_tokens(*ds, 0, args_.eval_iters * g);
}

}  // namespace mt
