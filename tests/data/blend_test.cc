// Megatron's dataset blending (data/blend.h, data/blended_dataset.h,
// data/dataset_builder.h): parsing of --data-path lists, the blend index
// (hand-computed start, shares within one sample of the weights at every
// prefix), sample counts per dataset, and a
// blend's samples equal to those of its member GPTDatasets built alone.
#include "data/blend.h"

#include <gtest/gtest.h>

#include <cmath>

#include "data/blended_dataset.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset.h"
#include "data_test_util.h"

namespace mt {
namespace blend_test {

using test::error_of;
using test::has;
using test::TempDir;

TEST(ParseBlend, WeightsAndPrefixesOrPrefixesAlone) {
  const Blend w = parse_blend({"0.3", "data/a", "0.7", "data/b"}, "--data-path");
  ASSERT_TRUE(w.weighted());
  EXPECT_EQ(w.prefixes, (std::vector<std::string>{"data/a", "data/b"}));
  EXPECT_EQ(w.weights, (std::vector<double>{0.3, 0.7}));
  const Blend u = parse_blend({"data/a", "data/b"}, "--data-path");
  EXPECT_FALSE(u.weighted());
  EXPECT_EQ(u.prefixes.size(), 2u);
  const Blend one = parse_blend({"data/a"}, "--data-path");
  EXPECT_EQ(one.prefixes, std::vector<std::string>{"data/a"});
  EXPECT_FALSE(one.weighted());
}

TEST(ParseBlend, RefusesWhatMegatronWouldMisread) {
  EXPECT_TRUE(has(error_of([] { parse_blend({}, "--data-path"); }), "has no dataset"));
  // Weights mixed with prefixes.
  EXPECT_TRUE(has(error_of([] { parse_blend({"0.3", "a", "b", "0.7"}, "--data-path"); }),
                  "mixes weights and prefixes"));
  // An odd list with a number: a dropped prefix or weight, not a dataset named "0.7".
  const std::string odd = error_of([] { parse_blend({"0.3", "a", "0.7"}, "--train-data-path"); });
  EXPECT_TRUE(has(odd, "--train-data-path word '0.3' is a number")) << odd;
  EXPECT_TRUE(has(odd, "fix:")) << odd;
  for (const char* bad : {"0", "-1", "nan", "inf", "1e400", "1e-400"}) {
    const std::string e = error_of([&] { parse_blend({bad, "a", "1", "b"}, "--data-path"); });
    EXPECT_TRUE(has(e, std::string("--data-path weight '") + bad + "' (for a) must be a finite "
                    "number > 0")) << e;
  }
}

// A weight below double's normal range is a number (not a prefix: "mixes
// weights and prefixes" would mislead), refused as too small; weights whose
// sum overflows are refused naming the sum. The fixes given are accepted.
TEST(ParseBlend, TinyWeightsAndAnInfiniteSumAreSaidAsSuch) {
  const std::string tiny = error_of([] { parse_blend({"1e-320", "a", "1", "b"}, "--data-path"); });
  EXPECT_TRUE(has(tiny, "--data-path weight '1e-320' (for a) is too small: below 2.22507e-308, "
                        "the smallest normal double; fix: scale all the weights up")) << tiny;
  EXPECT_FALSE(has(tiny, "mixes")) << tiny;
  EXPECT_EQ(parse_blend({"1e-300", "a", "1e20", "b"}, "--data-path").weights,
            (std::vector<double>{1e-300, 1e20}));  // scaled up by 1e20
  EXPECT_EQ(parse_blend({"1", "b"}, "--data-path").prefixes, std::vector<std::string>{"b"});
  const std::string sum =
      error_of([] { parse_blend({"1e308", "a", "1e308", "b"}, "--data-path"); });
  EXPECT_TRUE(has(sum, "--data-path weights sum to inf (too large for a double); fix: scale all "
                       "the weights down")) << sum;
  EXPECT_EQ(parse_blend({"1", "a", "1", "b"}, "--data-path").weights,
            (std::vector<double>{1, 1}));  // scaled down by 1e308
}

TEST(BlendIndex, DrawsTheDatasetThatLagsItsShareMost) {
  std::vector<int16_t> d;
  std::vector<int64_t> s;
  build_blending_indices({0.3, 0.7}, 10, &d, &s);
  // By hand: errors w_i * max(k, 1) - drawn_i, the larger wins, the first on ties.
  EXPECT_EQ(d, (std::vector<int16_t>{1, 0, 1, 1, 0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(s, (std::vector<int64_t>{0, 0, 1, 2, 1, 3, 4, 2, 5, 6}));
  // Every prefix of the index keeps each share within one sample of its weight.
  const std::vector<double> w = normalize_weights({5, 1, 3, 1});
  build_blending_indices(w, 5000, &d, &s);
  std::vector<int64_t> count(w.size(), 0);
  for (int64_t k = 0; k < 5000; ++k) {
    EXPECT_EQ(s[size_t(k)], count[size_t(d[size_t(k)])]) << k;  // each dataset in order
    ++count[size_t(d[size_t(k)])];
    for (size_t i = 0; i < w.size(); ++i)
      ASSERT_LE(std::abs(double(count[i]) - w[i] * double(k + 1)), 1.0 + 1e-9) << k << " " << i;
  }
}

TEST(BlendIndex, SamplesPerDatasetAreMegatronsCeilings) {
  EXPECT_EQ(samples_per_dataset({0.3, 0.7}, 80, 0.0), (std::vector<int64_t>{24, 56}));
  // ceil(ceil(80 w) * 1.005): 24 -> 24.12 -> 25, 56 -> 56.28 -> 57.
  EXPECT_EQ(samples_per_dataset({0.3, 0.7}, 80, 0.005), (std::vector<int64_t>{25, 57}));
  EXPECT_EQ(samples_per_dataset({1.0 / 3, 2.0 / 3}, 10, 0.0), (std::vector<int64_t>{4, 7}));
}

// Two corpora whose token ids do not overlap, so a sample names its source.
struct TwoCorpora {
  TempDir dir;
  std::string a, b;
  TwoCorpora() {
    a = dir.file("a");
    b = dir.file("b");
    write(a, 0, 120, 3);
    write(b, 1000, 80, 5);
  }
  static void write(const std::string& prefix, int32_t base, int docs, int salt) {
    IndexedDatasetWriter w(prefix, TokenDType::kInt32);
    for (int d = 0; d < docs; ++d) {
      std::vector<int32_t> t;
      for (int j = 0; j < 5 + (d * salt) % 13; ++j) t.push_back(base + (d * 7 + j) % 500);
      w.add_document(t);
    }
    w.finalize();
  }
};

std::vector<int32_t> sample(const SampleDataset& ds, int64_t i) {
  std::vector<int32_t> t(size_t(ds.seq_length() + 1));
  ds.read_sample(i, 0, ds.seq_length() + 1, t.data());
  return t;
}

TEST(BuildDatasetSplits, WeightedBlendReadsItsMembersInTheirOwnOrder) {
  TwoCorpora c;
  DatasetBuilderConfig cfg;
  cfg.blend = parse_blend({"0.25", c.a, "0.75", c.b}, "--data-path");
  cfg.split = "90,10,0";
  cfg.seq_length = 16;
  cfg.seed = 7;
  cfg.sizes = {200, 20, 0};
  const DatasetSplits s = build_dataset_splits(cfg);
  ASSERT_NE(s.split[0], nullptr);
  ASSERT_NE(s.split[1], nullptr);
  EXPECT_EQ(s.split[2], nullptr);
  const auto& train = dynamic_cast<const BlendedDataset&>(*s.split[0]);
  EXPECT_EQ(train.size(), 50 + 150);  // ceil(200 * 0.25) + ceil(200 * 0.75)
  EXPECT_EQ(train.drawn_from(0), 50);
  EXPECT_EQ(train.drawn_from(1), 150);
  // Each member is the GPTDataset of its split built with ceil(N w (1.005)) samples.
  const IndexedDataset ia(c.a), ib(c.b);
  const GptDataset ga(ia, split_ranges("90,10,0", ia.num_sequences())[0], 16, 51, 7, "train");
  const GptDataset gb(ib, split_ranges("90,10,0", ib.num_sequences())[0], 16, 151, 7, "train");
  for (int64_t k = 0; k < train.size(); ++k) {
    const int16_t j = train.index().dataset[size_t(k)];
    const std::vector<int32_t> got = sample(train, k);
    EXPECT_EQ(got, sample(j == 0 ? ga : gb, train.index().sample[size_t(k)])) << k;
    EXPECT_EQ(got[0] >= 1000, j == 1) << k;  // the ids say where it came from
  }
  EXPECT_EQ(s.notes.size(), 2u);
  EXPECT_TRUE(has(s.notes[0], "train blend of 2 datasets")) << s.notes[0];
}

TEST(BuildDatasetSplits, OnePrefixIsThePlainGptDataset) {
  TwoCorpora c;
  DatasetBuilderConfig cfg;
  cfg.blend = parse_blend({c.a}, "--data-path");
  cfg.seq_length = 16;
  cfg.seed = 7;
  cfg.sizes = {100, 0, 0};
  const DatasetSplits s = build_dataset_splits(cfg);
  const IndexedDataset ia(c.a);
  const GptDataset ga(ia, split_ranges("969,30,1", ia.num_sequences())[0], 16, 100, 7, "train");
  ASSERT_EQ(s.split[0]->size(), ga.size());
  for (int64_t k = 0; k < 100; ++k) EXPECT_EQ(sample(*s.split[0], k), sample(ga, k)) << k;
  EXPECT_TRUE(s.notes.empty());
}

TEST(BuildDatasetSplits, PerSplitBlendsUseWholeDatasets) {
  TwoCorpora c;
  DatasetBuilderConfig cfg;
  cfg.blend_per_split[0] = parse_blend({c.a, c.b}, "--train-data-path");
  cfg.blend_per_split[1] = parse_blend({"1", c.b}, "--valid-data-path");
  cfg.seq_length = 16;
  cfg.seed = 7;
  cfg.sizes = {40, 8, 0};
  const DatasetSplits s = build_dataset_splits(cfg);
  const auto& train = dynamic_cast<const BlendedDataset&>(*s.split[0]);
  const IndexedDataset ia(c.a), ib(c.b);
  // Unweighted: one epoch of each whole dataset, weighted by those epochs.
  EXPECT_EQ(train.member(0).document_index().size(), size_t(ia.num_sequences()));
  EXPECT_EQ(train.size(), 40);
  const double share = double(train.member(0).size()) /
                       double(train.member(0).size() + train.member(1).size());
  EXPECT_LE(std::abs(double(train.drawn_from(0)) - 40 * share), 1.0);
  // One weighted prefix of a split: its plain GPTDataset over all of it.
  const GptDataset vb(ib, {0, ib.num_sequences(), true}, 16, 8, 7, "valid");
  for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(sample(*s.split[1], k), sample(vb, k)) << k;
  // An unweighted blend smaller than the run is refused, not read past its end.
  cfg.sizes = {100000, 0, 0};
  EXPECT_TRUE(has(error_of([&] { build_dataset_splits(cfg); }), "fix: give weights"));
}

TEST(BlendedDatasetTest, RefusesAnIndexThatSkipsOrOverreads) {
  TwoCorpora c;
  const IndexedDataset ia(c.a);
  auto members = [&] {
    std::vector<std::unique_ptr<GptDataset>> m;
    m.push_back(std::make_unique<GptDataset>(ia, SplitRange{0, ia.num_sequences(), true}, 16, 0,
                                             1, "train"));
    return m;
  };
  BlendIndex skip{{0, 0}, {0, 2}};
  EXPECT_TRUE(has(error_of([&] { BlendedDataset(members(), skip, "train"); }),
                  "not dataset 0's next sample"));
  BlendIndex over;
  const int64_t n = members()[0]->size() + 1;
  for (int64_t k = 0; k < n; ++k) {
    over.dataset.push_back(0);
    over.sample.push_back(k);
  }
  EXPECT_TRUE(has(error_of([&] { BlendedDataset(members(), over, "train"); }),
                  "--mid-level-dataset-surplus"));
}

}  // namespace blend_test
}  // namespace mt
