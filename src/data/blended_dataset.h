// Megatron's BlendedDataset: sample k of the blend is sample
// dataset_sample_index[k] of dataset dataset_index[k] (data/blend.h says how
// the index is drawn). It owns its member datasets.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/blend.h"
#include "data/gpt_dataset.h"
#include "data/sample_dataset.h"

namespace mt {

struct BlendIndex {
  std::vector<int16_t> dataset;         // (size,) which member
  std::vector<int64_t> sample;          // (size,) which sample of it
  int64_t size() const { return int64_t(dataset.size()); }
};

class BlendedDataset final : public SampleDataset {
 public:
  // Checks that the index reads no member past its end (Megatron's
  // "the blend oversamples" error) and that the members' sequence lengths agree.
  BlendedDataset(std::vector<std::unique_ptr<GptDataset>> members, BlendIndex index,
                 std::string name);

  int64_t size() const override { return index_.size(); }
  int64_t seq_length() const override { return members_.front()->seq_length(); }
  void read_sample(int64_t i, int64_t start, int64_t n, int32_t* out) const override;
  std::string describe_sample(int64_t i) const override;

  int64_t num_members() const { return int64_t(members_.size()); }
  const GptDataset& member(int64_t j) const { return *members_[size_t(j)]; }
  // Samples the blend reads from member j.
  int64_t drawn_from(int64_t j) const { return drawn_[size_t(j)]; }
  const BlendIndex& index() const { return index_; }

 private:
  std::vector<std::unique_ptr<GptDataset>> members_;
  BlendIndex index_;
  std::string name_;
  std::vector<int64_t> drawn_;
};

}  // namespace mt
