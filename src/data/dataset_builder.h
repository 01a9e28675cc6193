// Megatron's BlendedMegatronDatasetBuilder: the train, valid and test datasets
// of a run from `--data-path` (one blend, cut by `--split` per dataset) or from
// `--train-data-path` / `--valid-data-path` / `--test-data-path` (a blend per
// split, each dataset whole). For each split that is read:
// - one prefix, no weight (with --data-path): a GPTDataset of that split;
// - one prefix (per-split paths, weighted or not): a GPTDataset of all of it;
// - otherwise a BlendedDataset (data/blend.h): with weights, of
//   sum_i ceil(N w_i) samples over members built with the surplus; without,
//   of min(N, sum of one epoch of each) samples weighted by those epochs
//   (fewer than N is refused here: a run would read past its end).
// N is the split's sample count (train: --train-iters x --global-batch-size).
// With --mock-data (no blends) each split is a GPTDataset over Megatron's mock
// documents (data/mock_gpt_dataset.h), cut "1,1,1" as Megatron cuts them.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/blend.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/low_level_dataset.h"
#include "data/sample_dataset.h"

namespace mt {

inline constexpr const char* kSplitNames[3] = {"train", "valid", "test"};

struct DatasetBuilderConfig {
  Blend blend;                           // --data-path (no prefixes: the per-split paths)
  std::array<Blend, 3> blend_per_split;  // --train/valid/test-data-path (no prefixes: none)
  // With --data-path; with mock, the run's --split ("": not given), only for
  // the note that it is not read.
  std::string split = "969,30,1";
  int64_t seq_length = 0;
  uint64_t seed = 0;
  double mid_level_surplus = 0.005;      // --mid-level-dataset-surplus
  int64_t vocab_size = 0;                // > 0: every token id is checked at start-up
  std::array<int64_t, 3> sizes{};        // samples read per split; 0: not built
  // --mock-data: the mock documents, with the tokenizer's vocabulary size
  // (before padding) and eod id; no blend may be given.
  bool mock = false;
  int64_t mock_vocab_size = 0, mock_eod = -1;
};

// Where blend indices come from: `build` makes one; a cache may return a saved
// copy for the same `description` instead (train/blend_cache.h). Empty: build.
using BlendIndexSource =
    std::function<BlendIndex(const std::string& description, const std::function<BlendIndex()>& build)>;

struct DatasetSplits {
  // The documents read (.bin/.idx or mock); declared first: outlive the splits.
  std::vector<std::unique_ptr<LowLevelDataset>> documents;
  std::array<std::unique_ptr<SampleDataset>, 3> split;   // train, valid, test; null: none
  std::vector<std::string> notes;                        // one line per blend, for the log
};

DatasetSplits build_dataset_splits(const DatasetBuilderConfig& config,
                                   const BlendIndexSource& source = {});

// What determines a blend index (its cache key): weights and size.
std::string blend_index_description(const std::vector<double>& normalized, int64_t size);

}  // namespace mt
