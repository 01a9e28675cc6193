// The training and validation data of a run: its train/valid (and with
// --skip-train test) splits (data/dataset_builder.h: one dataset cut by
// --split, or blends), and which samples each micro-batch of
// each DP rank reads (Megatron's MegatronPretrainingSampler order, so a step's
// global batch is the same whatever the layout). With context parallelism
// each CP rank of a DP rank gets the same samples, cut to its two sequence
// chunks (parallel/context_parallel.h): tokens and labels (b, s/CP).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "train/args.h"

namespace mt {

struct MicroBatchRef {
  int64_t first_sample = 0;  // global index of its first sample (keys dropout)
};

class DataLoader {
 public:
  // `blend_indices` (may be empty: build them) supplies blend indices, e.g. from
  // --data-cache-path (train/blend_cache.h); every rank calls it alike.
  DataLoader(const TrainArgs& args, int64_t dp_rank, int64_t cp_rank = 0,
             const BlendIndexSource& blend_indices = {});

  // Fills tokens/labels (b, s/CP) of micro-batch k of the iteration that
  // starts after `consumed_samples` and reads `global_batch` samples
  // (Megatron's MegatronPretrainingSampler: samples in order, whatever the
  // batch of each iteration).
  MicroBatchRef train_batch(int64_t consumed_samples, int64_t global_batch, int64_t k,
                            int32_t* tokens, int32_t* labels) const;
  // Evaluation batch `eval_iter` (0-based) of the validation split; every
  // evaluation reads the same eval_iters batches, so curves compare.
  MicroBatchRef valid_batch(int64_t eval_iter, int64_t k, int32_t* tokens, int32_t* labels) const;
  bool has_valid() const { return data_.split[1] != nullptr; }
  // The same for the test split, built only for --skip-train (which
  // evaluates the loaded checkpoint on both held-out splits).
  MicroBatchRef test_batch(int64_t eval_iter, int64_t k, int32_t* tokens, int32_t* labels) const;
  bool has_test() const { return data_.split[2] != nullptr; }
  // One line per blended split (its datasets, weights and samples), for the log.
  const std::vector<std::string>& notes() const { return data_.notes; }

 private:
  MicroBatchRef fill(const SampleDataset& ds, int64_t first_sample, int64_t global_batch,
                     int64_t k, int32_t* tokens, int32_t* labels) const;

  const TrainArgs& args_;
  int64_t dp_rank_;
  int64_t cp_rank_;
  int64_t vocab_size_;
  // CP > 1: the whole (b, s) samples before this rank's chunks are cut out.
  mutable std::vector<int32_t> full_tokens_, full_labels_;
  DatasetSplits data_;
};

}  // namespace mt
