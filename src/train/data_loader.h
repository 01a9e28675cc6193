// The training and validation data of a run: its train/valid (and with
// --skip-train test) splits (data/dataset_builder.h: one dataset cut by
// --split, or blends), and which samples each micro-batch of
// each DP rank reads (Megatron's MegatronPretrainingSampler order, so a step's
// global batch is the same whatever the layout). With context parallelism
// each CP rank of a DP rank gets the same samples, cut to its two sequence
// chunks (parallel/context_parallel.h): tokens and labels (b, s/CP). With
// Megatron's document flags it also marks the documents inside each sample.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "args/args.h"
#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "model/micro_batch.h"

namespace mt {

class DataLoader {
 public:
  // `blend_indices` (may be empty: build them) supplies blend indices, e.g. from
  // --data-cache-path (train/blend_cache.h); every rank calls it alike.
  // `program_train` (args.program_train_data): the training split the program
  // supplies (megatron::DataSource), read in the same sampler order as a
  // flag's; it must hold every sample the run reads (checked here).
  DataLoader(const TrainArgs& args, int64_t dp_rank, int64_t cp_rank = 0,
             const BlendIndexSource& blend_indices = {},
             std::shared_ptr<const SampleDataset> program_train = nullptr);

  // Fills micro-batch k (b, s/CP) of the iteration that starts after
  // `consumed_samples` and reads `global_batch` samples (Megatron's
  // MegatronPretrainingSampler: samples in order, whatever the batch of each
  // iteration); with the document flags also its positions, document starts
  // and loss mask (data/document_masks.h), from the whole samples.
  void train_batch(int64_t consumed_samples, int64_t global_batch, int64_t k,
                   MicroBatchInput& mb) const;
  // Evaluation batch `eval_iter` (0-based) of the validation split; every
  // evaluation reads the same eval_iters batches, so curves compare.
  void valid_batch(int64_t eval_iter, int64_t k, MicroBatchInput& mb) const;
  bool has_valid() const { return data_.split[1] != nullptr; }
  // The same for the test split, built only for --skip-train (which
  // evaluates the loaded checkpoint on both held-out splits).
  void test_batch(int64_t eval_iter, int64_t k, MicroBatchInput& mb) const;
  bool has_test() const { return data_.split[2] != nullptr; }

  // Tokens whose loss counts in the whole global batch of the iteration after
  // `consumed_samples` (every DP rank's samples; b·s each without
  // --eod-mask-loss): the denominator of the logged loss and of
  // --calculate-per-token-loss. The same on every rank, without communication.
  int64_t train_loss_tokens(int64_t consumed_samples, int64_t global_batch) const;
  // The same over the --eval-iters batches of the validation (or test) split.
  int64_t eval_loss_tokens(bool test) const;
  // One line per blended split (its datasets, weights and samples), for the log.
  const std::vector<std::string>& notes() const { return data_.notes; }

 private:
  void fill(const SampleDataset& ds, int64_t first_sample, int64_t global_batch, int64_t k,
            MicroBatchInput& mb) const;
  int64_t loss_tokens(const SampleDataset& ds, int64_t first_sample, int64_t samples) const;

  const TrainArgs& args_;
  int64_t dp_rank_;
  int64_t cp_rank_;
  int64_t vocab_size_;
  // The whole (b, s) samples before this rank's chunks are cut out (CP > 1),
  // and one sample's document arrays (document flags).
  mutable std::vector<int32_t> full_tokens_, full_labels_, sample_positions_;
  mutable std::vector<float> sample_mask_;
  DatasetSplits data_;
  std::shared_ptr<const SampleDataset> program_train_;
  const SampleDataset* train_ = nullptr;  // program_train_, else data_.split[0]; null: none
};

}  // namespace mt
