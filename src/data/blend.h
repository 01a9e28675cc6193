// Megatron-LM's dataset blending (megatron/core/datasets/blended_dataset.py,
// helpers.cpp, utils.get_blend_from_list and the size arithmetic of
// blended_megatron_dataset_builder.py), own code with the same semantics:
//
// - A blend is what `--data-path` (or `--train-data-path` ...) holds: either
//   "W1 PREFIX1 W2 PREFIX2 ..." (weights, normalized by their sum) or
//   "PREFIX1 PREFIX2 ..." (no weights: each dataset weighs its size).
// - With weights and a requested size N, dataset i contributes
//   ceil(N * w_i) samples (the blend holds their sum, >= N) and is built with
//   ceil(ceil(N * w_i) * (1 + surplus)) samples (Megatron's
//   --mid-level-dataset-surplus, default 0.005), so its shuffles are those of
//   a GPTDataset of that size.
// - Sample k of the blend comes from the dataset whose count lags its share
//   the most: argmax_i (w_i * max(k, 1) - drawn_i), the first on ties; it is
//   that dataset's next unread sample (drawn_i, in the dataset's own shuffled
//   order). No random numbers: the same blend at any layout and seed reads
//   the same samples in the same order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct Blend {
  std::vector<std::string> prefixes;
  std::vector<double> weights;  // as given, one per prefix; empty: none given
  bool weighted() const { return !weights.empty(); }
};

// Megatron's get_blend_from_list, checked: an even list whose every other word
// (from the first) is a number is weighted; a list of prefixes alone is not.
// Refuses (naming `flag`, the word and the fix) an empty list, weights mixed
// with prefixes, weights that are not finite and > 0, and an odd list whose
// numbers look like weights with no dataset of that name.
Blend parse_blend(const std::vector<std::string>& words, const std::string& flag);

// w / sum(w).
std::vector<double> normalize_weights(const std::vector<double>& weights);

// ceil(ceil(target * w_i) * (1 + surplus)) for each weight (surplus 0: the
// blend's share of dataset i). Checked against int64 overflow.
std::vector<int64_t> samples_per_dataset(const std::vector<double>& normalized, int64_t target,
                                         double surplus);

// The blend index of `size` samples drawn from datasets of the given
// normalized weights: dataset_index[k] and, within it, dataset_sample_index[k].
void build_blending_indices(const std::vector<double>& normalized, int64_t size,
                            std::vector<int16_t>* dataset_index,
                            std::vector<int64_t>* dataset_sample_index);

// Most datasets in one blend (Megatron's int16 dataset index).
inline constexpr int64_t kMaxBlendDatasets = 32767;

}  // namespace mt
