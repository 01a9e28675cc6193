#include "data/dataset_builder.h"

#include <cstdio>
#include <map>

#include "core/error.h"
#include "data/gpt_dataset.h"
#include "data/mock_gpt_dataset.h"

namespace mt {

namespace {

class Builder {
 public:
  Builder(const DatasetBuilderConfig& c, const BlendIndexSource& source, DatasetSplits* out)
      : c_(c), source_(source), out_(out) {}

  void build_split(int i) {
    if (c_.mock) {
      mock_split(i);
      return;
    }
    const bool per_split = c_.blend.prefixes.empty();
    const Blend& blend = per_split ? c_.blend_per_split[size_t(i)] : c_.blend;
    if (c_.sizes[size_t(i)] <= 0 || blend.prefixes.empty()) return;
    const std::string flag = per_split ? std::string("--") + kSplitNames[i] + "-data-path"
                                       : std::string("--data-path");
    std::vector<SplitRange> ranges;
    for (const std::string& prefix : blend.prefixes) {
      const IndexedDataset& d = open(prefix);
      if (per_split) {
        ranges.push_back({0, d.num_sequences(), true});  // whole (empty: refused below)
      } else {
        ranges.push_back(split_ranges(c_.split, d.num_sequences())[size_t(i)]);
      }
    }
    if (!ranges[0].present) {  // the split has weight 0 (Megatron's None), for every prefix
      MT_CHECK(i != 0, "--split ", c_.split, " leaves no training documents; fix: give the "
               "first weight > 0");
      return;
    }
    if (blend.prefixes.size() == 1 && (per_split || !blend.weighted())) {
      single(i, blend.prefixes[0], ranges[0], flag);
      return;
    }
    for (size_t j = 0; j < ranges.size(); ++j)
      MT_CHECK(ranges[j].size() > 0, flag, ": dataset ", blend.prefixes[j], " (",
               open(blend.prefixes[j]).num_sequences(), " sequences) has none in the ",
               kSplitNames[i], " split of --split ", c_.split, "; fix: give that split more "
               "weight, add data, or leave the dataset out of the blend");
    blended(i, blend, ranges, flag);
  }

 private:
  const IndexedDataset& open(const std::string& prefix) {
    auto it = opened_.find(prefix);
    if (it != opened_.end()) return *it->second;
    auto owned = std::make_unique<IndexedDataset>(prefix);
    const IndexedDataset& d = *owned;
    out_->documents.push_back(std::move(owned));
    // Every token id checked once at start-up (a corrupt .bin fails here, with
    // the file, document, position and id, not when its sample is first read).
    if (c_.vocab_size > 0) d.validate_token_range(c_.vocab_size);
    opened_[prefix] = &d;
    return d;
  }

  // Megatron's MockGPTDataset: the mock documents (built once) cut 1,1,1.
  void mock_split(int i) {
    if (c_.sizes[size_t(i)] <= 0) return;
    if (mock_ == nullptr) {
      auto owned = std::make_unique<MockGptLowLevelDataset>(c_.mock_vocab_size, c_.mock_eod);
      mock_ = owned.get();
      out_->documents.push_back(std::move(owned));
      std::string note = "data: --mock-data: Megatron's MockGPTDataset, " +
                         std::to_string(kMockDocuments) + " documents of 1 to " +
                         std::to_string(kMockMaxSequenceLength - 1) +
                         " tokens (numpy default_rng(" + std::to_string(kMockSeed) +
                         ")), tokens 1, 2, ... mod " + std::to_string(c_.mock_vocab_size) +
                         " then eod " + std::to_string(c_.mock_eod) + ", split " + kMockSplit;
      if (!c_.split.empty() && c_.split != kMockSplit)
        note += " (--split " + c_.split + " is not read with --mock-data, as in Megatron-LM)";
      out_->notes.push_back(note);
      // Every id below the model's vocabulary (the tokenizer's fits it).
      MT_CHECK(c_.vocab_size <= 0 || c_.mock_vocab_size <= c_.vocab_size, "--mock-data: ids up "
               "to ", c_.mock_vocab_size - 1, " but the model's vocabulary has ", c_.vocab_size,
               " entries; fix: a --vocab-size the tokenizer's ids fit");
    }
    const SplitRange range = split_ranges(kMockSplit, mock_->num_sequences())[size_t(i)];
    out_->split[size_t(i)] = std::make_unique<GptDataset>(*mock_, range, c_.seq_length,
                                                          c_.sizes[size_t(i)], c_.seed,
                                                          kSplitNames[i]);
  }

  std::unique_ptr<GptDataset> gpt(int i, const std::string& prefix, SplitRange range,
                                  int64_t samples) {
    return std::make_unique<GptDataset>(open(prefix), range, c_.seq_length, samples, c_.seed,
                                        kSplitNames[i]);
  }

  void single(int i, const std::string& prefix, SplitRange range, const std::string& flag) {
    if (range.size() == 0) {
      MT_CHECK(i != 0, flag == "--data-path" ? "--split " + c_.split : flag + " " + prefix,
               " leaves no training documents out of ", open(prefix).num_sequences(),
               "; fix: give the first weight > 0");
      return;  // no validation (or test) documents: that split is not evaluated
    }
    out_->split[size_t(i)] = gpt(i, prefix, range, c_.sizes[size_t(i)]);
  }

  void blended(int i, const Blend& blend, const std::vector<SplitRange>& ranges,
               const std::string& flag) {
    const int64_t n = c_.sizes[size_t(i)];
    const size_t m = blend.prefixes.size();
    std::vector<std::unique_ptr<GptDataset>> members;
    std::vector<double> weights;
    int64_t size = 0;
    if (blend.weighted()) {
      weights = normalize_weights(blend.weights);
      const std::vector<int64_t> target = samples_per_dataset(weights, n, 0.0);
      const std::vector<int64_t> built = samples_per_dataset(weights, n, c_.mid_level_surplus);
      for (size_t j = 0; j < m; ++j) {
        members.push_back(gpt(i, blend.prefixes[j], ranges[j], built[j]));
        size += target[j];
      }
    } else {
      std::vector<double> epochs;
      int64_t total = 0;
      for (size_t j = 0; j < m; ++j) {
        members.push_back(gpt(i, blend.prefixes[j], ranges[j], 0));  // one epoch
        epochs.push_back(double(members.back()->size()));
        total += members.back()->size();
      }
      MT_CHECK(total >= n, "the ", kSplitNames[i], " blend of ", flag, " without weights holds ",
               total, " samples (one epoch of each dataset) but the run reads ", n,
               "; fix: give weights (W1 PREFIX1 W2 PREFIX2 ...), which repeat the datasets, "
               "or read fewer samples");
      weights = normalize_weights(epochs);
      size = n;
    }
    auto build = [&] {
      BlendIndex index;
      build_blending_indices(weights, size, &index.dataset, &index.sample);
      return index;
    };
    BlendIndex index = source_ ? source_(blend_index_description(weights, size), build) : build();
    auto blend_ds = std::make_unique<BlendedDataset>(std::move(members), std::move(index),
                                                     kSplitNames[i]);
    std::string note = std::string("data: ") + kSplitNames[i] + " blend of " + std::to_string(m) +
                       " datasets (" + flag + "), " + std::to_string(size) + " samples:";
    for (size_t j = 0; j < m; ++j) {
      char share[32];
      std::snprintf(share, sizeof share, "%.4g", weights[j]);
      note += std::string(j ? ";" : "") + " " + blend.prefixes[j] + " weight " + share + ", " +
              std::to_string(blend_ds->drawn_from(int64_t(j))) + " of " +
              std::to_string(blend_ds->member(int64_t(j)).size()) + " built";
    }
    out_->notes.push_back(note);
    out_->split[size_t(i)] = std::move(blend_ds);
  }

  const DatasetBuilderConfig& c_;
  const BlendIndexSource& source_;
  DatasetSplits* out_;
  std::map<std::string, const IndexedDataset*> opened_;
  const MockGptLowLevelDataset* mock_ = nullptr;
};

}  // namespace

std::string blend_index_description(const std::vector<double>& normalized, int64_t size) {
  std::string d = "megatron.cpp blend index 1\nsize " + std::to_string(size) + "\nweights";
  for (double w : normalized) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.17g", w);
    d += buf;
  }
  return d + "\n";
}

DatasetSplits build_dataset_splits(const DatasetBuilderConfig& c, const BlendIndexSource& source) {
  MT_CHECK(c.blend.prefixes.empty() || (c.blend_per_split[0].prefixes.empty() &&
                                        c.blend_per_split[1].prefixes.empty() &&
                                        c.blend_per_split[2].prefixes.empty()),
           "--data-path and --train/valid/test-data-path are both given; use one");
  MT_CHECK(!c.mock || (c.blend.prefixes.empty() && c.blend_per_split[0].prefixes.empty() &&
                       c.blend_per_split[1].prefixes.empty() &&
                       c.blend_per_split[2].prefixes.empty()),
           "--mock-data and a data path are both given; fix: use one data source (Megatron-LM "
           "refuses both too)");
  DatasetSplits out;
  Builder b(c, source, &out);
  for (int i = 0; i < 3; ++i) b.build_split(i);
  return out;
}

}  // namespace mt
