// Megatron's GPTDataset (megatron/core/datasets/gpt_dataset.py) over one
// split of a LowLevelDataset (an IndexedDataset, or --mock-data's documents),
// and the micro-batch layout of Megatron's MegatronPretrainingSampler.
//
// Semantics replicated (own code; the shuffles use Philox, not numpy's stream):
// - Split: "969,30,1" -> up to three plain decimals >= 0 (Megatron's regex
//   [.0-9]+ would read "1,-1,0" as 1,1,0 and "abc" as nothing: refused here),
//   padded with 0 to three, normalized by their sum; cumulative bookends [0, a, a+b, 1]; split i
//   gets sequences [round(lo*N), round(hi*N)) with Python's round (half to
//   even), N = number of sequences (GPT splits by sequence). A split whose
//   bookends are equal is absent (Megatron's None).
// - tokens_per_epoch = sum of the split's sequence lengths; num_epochs = the
//   smallest count with num_epochs * tokens_per_epoch >= num_samples * s + 1.
// - Document index = the split's sequence ids repeated num_epochs times and
//   shuffled (Fisher-Yates); when the last epoch is needed for fewer than 80%
//   of an epoch's samples it is shuffled separately and appended (Megatron's
//   separate_final_epoch), so most of the run sees whole shuffled epochs.
// - Sample k = tokens [k*s, k*s + s + 1) of the concatenation of the documents
//   in document-index order, crossing document boundaries (add_extra_token);
//   samples = (num_epochs * tokens_per_epoch - 1) / s (partial last dropped).
// - Shuffle index = a permutation of the samples (with separate_final_epoch,
//   the final epoch's samples are permuted among themselves, after the rest).
// Random streams: RngStream::make(seed, "gpt_dataset/<name>/document_index" or
// ".../shuffle_index"), step 0 for the main part and 1 for the final epoch.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/sample_dataset.h"

namespace mt {

struct SplitRange {
  int64_t begin = 0, end = 0;  // sequence ids [begin, end)
  bool present = false;        // false: Megatron builds no dataset for it (None)
  int64_t size() const { return end - begin; }
};

// Megatron's parse_and_normalize_split: e.g. "969,30,1" -> {0.969, 0.03, 0.001}.
std::array<double, 3> parse_and_normalize_split(std::string_view split);
// Sequence ranges of the train / valid / test splits of `num_sequences`.
std::array<SplitRange, 3> split_ranges(std::string_view split, int64_t num_sequences);

class GptDataset final : public SampleDataset {
 public:
  // num_samples: samples the caller will draw (train_iters * global batch for
  // train); <= 0 builds exactly one epoch. `name` ("train", "valid", "test")
  // keys the shuffles together with `seed`. `data` must outlive this.
  GptDataset(const LowLevelDataset& data, SplitRange range, int64_t seq_length,
             int64_t num_samples, uint64_t seed, std::string name);

  // All samples built (Megatron's len(): >= num_samples; whole epochs).
  int64_t size() const override { return int64_t(shuffle_index_.size()); }
  int64_t seq_length() const override { return seq_length_; }
  int64_t tokens_per_epoch() const { return tokens_per_epoch_; }
  int64_t num_epochs() const { return num_epochs_; }
  bool separate_final_epoch() const { return separate_final_epoch_; }
  const std::string& name() const { return name_; }
  const LowLevelDataset& low_level() const { return *data_; }
  // Sequence ids in reading order (num_epochs * range.size()).
  const std::vector<int32_t>& document_index() const { return document_index_; }
  // Unshuffled sample behind dataset index i (shuffle_index[i]).
  int64_t shuffled(int64_t i) const;

  // tokens[0, s+1) = sample i in dataset order (after the shuffle).
  void get(int64_t i, int32_t* tokens /* (s+1,) */) const;
  // out[0, n) = tokens [start, start + n) of sample i (start + n <= s + 1).
  void read_sample(int64_t i, int64_t start, int64_t n, int32_t* out) const override;
  std::string describe_sample(int64_t i) const override;
  // Start of unshuffled sample k: (position in document_index, token offset).
  std::pair<int64_t, int64_t> sample_start(int64_t k) const;

 private:
  void check_index_memory(const std::string& what) const;

  const LowLevelDataset* data_;
  SplitRange range_;
  int64_t seq_length_;
  int64_t num_samples_;
  std::string name_;
  int64_t tokens_per_epoch_ = 0;
  int64_t num_epochs_ = 1;
  bool separate_final_epoch_ = false;
  std::vector<int32_t> document_index_;  // (num_epochs * docs,)
  std::vector<int64_t> sample_doc_;      // (samples + 1,) position in document_index_
  std::vector<int32_t> sample_offset_;   // (samples + 1,) token offset in that document
  std::vector<int64_t> shuffle_index_;   // (samples,)
};

// Megatron's MegatronPretrainingSampler layout: global batch j holds samples
// [j*G, (j+1)*G); within it, micro-batch k of DP rank r holds
// j*G + k*b*dp + r*b + [0, b). Returns that first sample index. Checks
// G % (b * dp) == 0 and k < G / (b * dp).
int64_t micro_batch_first_sample(int64_t iteration_index, int64_t global_batch,
                                 int64_t micro_batch, int64_t dp_size, int64_t dp_rank, int64_t k);

// Fills one micro-batch from samples first_sample_index + [0, b) of `dataset`
// (dataset order): tokens[i] = sample[:-1], labels[i] = sample[1:].
// tokens, labels: (b, s) row-major, written with `=`. With vocab_size > 0 every
// id is checked against it (check_token_span's message) as it is read.
void fill_micro_batch(const SampleDataset& dataset, int64_t first_sample_index, int64_t b,
                      int32_t* tokens /* (b, s) */, int32_t* labels /* (b, s) */,
                      int64_t vocab_size = 0);

// Owning buffers for one micro-batch, allocated once and refilled each step.
struct MicroBatch {
  int64_t b = 0, s = 0;
  std::vector<int32_t> tokens;  // (b, s)
  std::vector<int32_t> labels;  // (b, s)
  MicroBatch(int64_t micro_batch, int64_t seq_length)
      : b(micro_batch), s(seq_length), tokens(size_t(b * s)), labels(size_t(b * s)) {}
  // Checks that s matches the dataset's sequence length.
  void fill(const SampleDataset& dataset, int64_t first_sample_index, int64_t vocab_size = 0);
};

}  // namespace mt
