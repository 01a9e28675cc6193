#include "data/blended_dataset.h"

#include "core/error.h"

namespace mt {

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<GptDataset>> members, BlendIndex index,
                               std::string name)
    : members_(std::move(members)), index_(std::move(index)), name_(std::move(name)) {
  MT_CHECK(!members_.empty() && index_.dataset.size() == index_.sample.size(),
           "blended dataset '", name_, "' without members or with a torn index (internal error)");
  drawn_.assign(members_.size(), 0);
  for (int64_t k = 0; k < index_.size(); ++k) {
    const int64_t j = index_.dataset[size_t(k)];
    MT_CHECK(j >= 0 && j < num_members(), "blend index of '", name_, "': sample ", k,
             " names dataset ", j, " of ", num_members(), " (a corrupt --data-cache-path file?)");
    MT_CHECK(index_.sample[size_t(k)] == drawn_[size_t(j)], "blend index of '", name_,
             "': sample ", k, " is not dataset ", j, "'s next sample (a corrupt "
             "--data-cache-path file?)");
    ++drawn_[size_t(j)];
  }
  for (size_t j = 0; j < members_.size(); ++j) {
    MT_CHECK(members_[j]->seq_length() == members_[0]->seq_length(), "blend '", name_,
             "' members differ in sequence length (internal error)");
    MT_CHECK(drawn_[j] <= members_[j]->size(), "the ", name_, " blend reads ", drawn_[j],
             " samples of ", members_[j]->low_level().path_prefix(), ", which holds ",
             members_[j]->size(), "; fix: raise --mid-level-dataset-surplus (now it builds ",
             "that many), e.g. ten-fold");
  }
}

void BlendedDataset::read_sample(int64_t i, int64_t start, int64_t n, int32_t* out) const {
  MT_CHECK(i >= 0 && i < size(), "sample ", i, " out of range: blended dataset '", name_,
           "' has ", size(), " samples");
  members_[size_t(index_.dataset[size_t(i)])]->read_sample(index_.sample[size_t(i)], start, n, out);
}

std::string BlendedDataset::describe_sample(int64_t i) const {
  if (i < 0 || i >= size()) return "sample " + std::to_string(i) + " of blend '" + name_ + "'";
  const GptDataset& m = *members_[size_t(index_.dataset[size_t(i)])];
  return "sample " + std::to_string(i) + " of blend '" + name_ + "' = " +
         m.describe_sample(index_.sample[size_t(i)]);
}

}  // namespace mt
