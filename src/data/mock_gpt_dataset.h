// Megatron's MockGPTLowLevelDataset (megatron/core/datasets/gpt_dataset.py),
// the documents of --mock-data: 100000 documents whose lengths are
// numpy.random.default_rng(seed=0).integers(low=1, high=4096, size=100000,
// dtype=int32) (data/numpy_random.h; the seed, count and length bound are
// Megatron's hard-coded class constants, not the run's --seed or
// --seq-length), and document i of length L holds
//   (1, 2, ..., L-1) mod V, then eod
// with V and eod the tokenizer's (Megatron's tokenizer.vocab_size before
// padding, and tokenizer.eod). Tokens are computed when read; only the
// lengths are held (400 KB).
//
// Megatron's builder (BlendedMegatronDatasetConfig with mock = True) cuts
// these documents with split "1,1,1" whatever --split says, and a
// GPTDataset (data/gpt_dataset.h) over each split makes the samples as it
// does for a .bin/.idx.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/low_level_dataset.h"

namespace mt {

inline constexpr uint64_t kMockSeed = 0;
inline constexpr int64_t kMockDocuments = 100000;
inline constexpr int32_t kMockMaxSequenceLength = 4096;  // lengths in [1, 4096)
inline constexpr const char* kMockSplit = "1,1,1";

class MockGptLowLevelDataset final : public LowLevelDataset {
 public:
  // vocab_size: the tokenizer's (> 0); eod: its end-of-document id, in [0, vocab_size).
  MockGptLowLevelDataset(int64_t vocab_size, int64_t eod);

  const std::string& path_prefix() const override { return name_; }
  int64_t num_sequences() const override { return int64_t(lengths_.size()); }
  UnalignedArray<int32_t> sequence_lengths() const override {
    return {reinterpret_cast<const unsigned char*>(lengths_.data()), int64_t(lengths_.size())};
  }
  void read(int64_t i, int64_t offset, int64_t n, int32_t* out) const override;

  int64_t vocab_size() const { return vocab_size_; }
  int32_t eod() const { return eod_; }

 private:
  int64_t vocab_size_;
  int32_t eod_;
  std::string name_;
  std::vector<int32_t> lengths_;  // (kMockDocuments,)
};

}  // namespace mt
