// What a training loop reads samples from: a GPTDataset over one indexed
// dataset, or a blend of several (data/blended_dataset.h). Sample i holds
// seq_length + 1 tokens (inputs and, shifted by one, labels).
#pragma once
#include <cstdint>
#include <string>

namespace mt {

class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  // Samples held (Megatron's len()).
  virtual int64_t size() const = 0;
  virtual int64_t seq_length() const = 0;
  // out[0, n) = tokens [start, start + n) of sample i (start + n <= s + 1).
  virtual void read_sample(int64_t i, int64_t start, int64_t n, int32_t* out) const = 0;
  // Where sample i comes from, for messages: "sample 12 of GPT dataset
  // 'train' (data/corpus_text_document)".
  virtual std::string describe_sample(int64_t i) const = 0;
};

}  // namespace mt
