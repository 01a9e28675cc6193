#include "data/mock_gpt_dataset.h"

#include <gtest/gtest.h>

#include <vector>

#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "data_test_util.h"

// Expected numbers from Megatron's MockGPTLowLevelDataset code path with
// python3-numpy 1.24.2:
//   l = numpy.random.default_rng(seed=0).integers(low=1, high=4096, size=100000,
//                                                 dtype=numpy.int32)
//   [int(l[i]) for i in (33332, 33333, 66666, 66667, 99999)], int(l.sum()),
//   and the sums of l[:33333], l[33333:66667], l[66667:] (split "1,1,1": the
//   bookends round(1/3 * 100000) = 33333 and round(2/3 * 100000) = 66667);
// document i is (numpy.arange(l[i] - 1) + 1) % vocab_size followed by eod.

namespace mt {
namespace mock_gpt_dataset_test {

using test::error_of;
using test::has;

// Token j of mock document `len` long, by Megatron's formula.
int32_t mock_token(int64_t j, int64_t len, int64_t vocab, int32_t eod) {
  return j < len - 1 ? int32_t((j + 1) % vocab) : eod;
}

TEST(MockGptLowLevelDataset, LengthsAreMegatrons) {
  const MockGptLowLevelDataset d(101, 100);
  ASSERT_EQ(d.num_sequences(), 100000);
  const UnalignedArray<int32_t> l = d.sequence_lengths();
  const int32_t first[] = {3484, 2609, 2094, 1105, 1261, 168, 309, 68};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(l[i], first[i]) << "document " << i;
  EXPECT_EQ(l[33332], 2812);
  EXPECT_EQ(l[33333], 706);
  EXPECT_EQ(l[66666], 3170);
  EXPECT_EQ(l[66667], 338);
  EXPECT_EQ(l[99999], 769);
  int64_t sum = 0;
  for (int64_t i = 0; i < l.size(); ++i) sum += l[i];
  EXPECT_EQ(sum, 204637097);
}

// Document 5 (168 tokens) with a vocabulary of 101: 1..100, 0, 1..66, eod.
TEST(MockGptLowLevelDataset, TokensWrapAtTheVocabularyAndEndWithEod) {
  const MockGptLowLevelDataset d(101, 100);
  std::vector<int32_t> all(168);
  d.read(5, 0, 168, all.data());
  EXPECT_EQ(all[0], 1);
  EXPECT_EQ(all[99], 100);
  EXPECT_EQ(all[100], 0);  // (100 + 1) % 101
  EXPECT_EQ(all[166], 66);
  EXPECT_EQ(all[167], 100);  // eod
  std::vector<int32_t> part(5);
  d.read(5, 98, 5, part.data());
  EXPECT_EQ(part, (std::vector<int32_t>{99, 100, 0, 1, 2}));
  // Document 7 (68 tokens) with GPT-2's vocabulary: no wrap.
  const MockGptLowLevelDataset gpt2(50257, 50256);
  std::vector<int32_t> doc7(68);
  gpt2.read(7, 0, 68, doc7.data());
  for (int j = 0; j < 67; ++j) EXPECT_EQ(doc7[size_t(j)], j + 1);
  EXPECT_EQ(doc7[67], 50256);
}

TEST(MockGptLowLevelDataset, BadTokenizerRefused) {
  EXPECT_TRUE(has(error_of([] { MockGptLowLevelDataset(100, -1); }), "eod"));
  EXPECT_TRUE(has(error_of([] { MockGptLowLevelDataset(100, 100); }), "fix: a tokenizer"));
  EXPECT_TRUE(has(error_of([] { MockGptLowLevelDataset(0, 0); }), "NullTokenizer"));
  const MockGptLowLevelDataset d(101, 100);
  int32_t out[2];
  EXPECT_TRUE(has(error_of([&] { d.read(7, 67, 2, out); }), "outside mock document 7"));
}

DatasetBuilderConfig mock_config(int64_t seq_length) {
  DatasetBuilderConfig c;
  c.mock = true;
  c.mock_vocab_size = 101;
  c.mock_eod = 100;
  c.vocab_size = 101;
  c.split = "";
  c.seq_length = seq_length;
  c.seed = 1234;
  c.sizes = {16, 8, 8};
  return c;
}

// Megatron cuts the mock documents 1,1,1: each split's epoch is the sum of its
// documents' lengths (numpy's sums above).
TEST(MockGptDataset, SplitsAreOneOneOne) {
  const DatasetSplits s = build_dataset_splits(mock_config(512));
  const int64_t want[3] = {68190290, 68159742, 68287065};
  const int64_t docs[3] = {33333, 33334, 33333};
  for (int i = 0; i < 3; ++i) {
    const auto* g = dynamic_cast<const GptDataset*>(s.split[size_t(i)].get());
    ASSERT_NE(g, nullptr) << kSplitNames[i];
    EXPECT_EQ(g->tokens_per_epoch(), want[i]) << kSplitNames[i];
    EXPECT_EQ(int64_t(g->document_index().size()), docs[i]) << kSplitNames[i];
    EXPECT_EQ(g->size(), (want[i] - 1) / 512) << kSplitNames[i];
  }
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_TRUE(has(s.notes[0], "MockGPTDataset")) << s.notes[0];
  EXPECT_FALSE(has(s.notes[0], "not read")) << s.notes[0];
}

// Every sample is s + 1 tokens of the mock documents concatenated in
// document-index order from token k * s (k: the unshuffled sample), with the
// ids Megatron's formula gives.
TEST(MockGptDataset, SamplesReadTheDocumentsInIndexOrder) {
  const int64_t s = 512;
  const DatasetSplits splits = build_dataset_splits(mock_config(s));
  const auto& g = dynamic_cast<const GptDataset&>(*splits.split[0]);
  const UnalignedArray<int32_t> len = g.low_level().sequence_lengths();
  for (int64_t i = 0; i < 6; ++i) {
    std::vector<int32_t> got(size_t(s + 1));
    g.get(i, got.data());
    // Walk the document index to token k * s of the stream.
    int64_t p = g.shuffled(i) * s, pos = 0;
    while (p >= len[g.document_index()[size_t(pos)]]) p -= len[g.document_index()[size_t(pos++)]];
    for (int64_t t = 0; t <= s; ++t) {
      const int64_t l = len[g.document_index()[size_t(pos)]];
      ASSERT_EQ(got[size_t(t)], mock_token(p, l, 101, 100)) << "sample " << i << " token " << t;
      if (++p == l) {
        p = 0;
        ++pos;
      }
    }
  }
}

TEST(MockGptDataset, SplitFlagIsNotedAndDataPathsRefused) {
  DatasetBuilderConfig c = mock_config(512);
  c.split = "98,2,0";
  c.sizes = {16, 0, 0};
  const DatasetSplits s = build_dataset_splits(c);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_TRUE(has(s.notes[0], "--split 98,2,0 is not read with --mock-data")) << s.notes[0];
  EXPECT_EQ(s.split[1], nullptr);  // size 0: not built
  c.blend.prefixes = {"data/x_text_document"};
  EXPECT_TRUE(has(error_of([&] { build_dataset_splits(c); }), "--mock-data and a data path"));
}

}  // namespace mock_gpt_dataset_test
}  // namespace mt
