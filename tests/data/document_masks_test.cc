#include "data/document_masks.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace mt {
namespace document_masks_test {

// Megatron's _get_ltor_masks_and_position_ids written as it is (a full
// (s, s) mask, updated per end-of-document index), as the reference.
struct Reference {
  std::vector<std::vector<bool>> visible;  // [query][key]
  std::vector<float> loss_mask;
  std::vector<int64_t> positions;
};

Reference megatron_masks(const std::vector<int32_t>& data, int32_t eod, bool reset_position_ids,
                         bool reset_attention_mask, bool eod_mask_loss) {
  const int64_t s = int64_t(data.size());
  Reference r;
  r.visible.assign(size_t(s), std::vector<bool>(size_t(s), false));
  for (int64_t q = 0; q < s; ++q)
    for (int64_t k = 0; k <= q; ++k) r.visible[size_t(q)][size_t(k)] = true;  // tril
  r.loss_mask.assign(size_t(s), 1.f);
  if (eod_mask_loss)
    for (int64_t t = 0; t < s; ++t)
      if (data[size_t(t)] == eod) r.loss_mask[size_t(t)] = 0.f;
  for (int64_t t = 0; t < s; ++t) r.positions.push_back(t);
  if (reset_position_ids || reset_attention_mask) {
    int64_t prev = 0;
    for (int64_t i = 0; i < s; ++i) {
      if (data[size_t(i)] != eod) continue;
      if (reset_attention_mask)
        for (int64_t q = i + 1; q < s; ++q)
          for (int64_t k = 0; k <= i; ++k) r.visible[size_t(q)][size_t(k)] = false;
      if (reset_position_ids) {
        for (int64_t t = i + 1; t < s; ++t) r.positions[size_t(t)] -= i + 1 - prev;
        prev = i + 1;
      }
    }
  }
  return r;
}

TEST(DocumentMasks, HandExample) {
  // Two documents and the start of a third: "a b EOD c EOD d".
  const int32_t E = 9;
  const std::vector<int32_t> tokens = {1, 2, E, 3, E, 4};
  std::vector<int32_t> pos(6), start(6);
  std::vector<float> mask(6);
  DocumentFlags f{true, true, true, E};
  EXPECT_EQ(document_masks(tokens.data(), 6, f, pos.data(), start.data(), mask.data()), 4);
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(start, (std::vector<int32_t>{0, 0, 0, 3, 3, 5}));
  EXPECT_EQ(mask, (std::vector<float>{1, 1, 0, 1, 0, 1}));
  // Each flag alone changes only its own array.
  f = DocumentFlags{false, false, false, E};
  EXPECT_EQ(document_masks(tokens.data(), 6, f, pos.data(), start.data(), mask.data()), 6);
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(start, (std::vector<int32_t>(6, 0)));
  EXPECT_EQ(mask, (std::vector<float>(6, 1.f)));
}

TEST(DocumentMasks, EqualMegatronsMasksOnRandomSamples) {
  std::mt19937 rng(5);
  const int32_t eod = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t s = 1 + int64_t(rng() % 40);
    std::vector<int32_t> tokens(static_cast<size_t>(s));
    for (int32_t& t : tokens) t = int32_t(rng() % 4);  // eod about one in four
    for (int flags = 0; flags < 8; ++flags) {
      const DocumentFlags f{(flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0, eod};
      const Reference want = megatron_masks(tokens, eod, f.reset_position_ids,
                                            f.reset_attention_mask, f.eod_mask_loss);
      std::vector<int32_t> pos(static_cast<size_t>(s)), start(pos);
      std::vector<float> mask(static_cast<size_t>(s));
      const int64_t counted =
          document_masks(tokens.data(), s, f, pos.data(), start.data(), mask.data());
      int64_t want_counted = 0;
      for (int64_t t = 0; t < s; ++t) {
        ASSERT_EQ(pos[size_t(t)], want.positions[size_t(t)]) << "trial " << trial << " t " << t;
        ASSERT_EQ(mask[size_t(t)], want.loss_mask[size_t(t)]) << "trial " << trial << " t " << t;
        want_counted += want.loss_mask[size_t(t)] != 0.f;
        // Query t sees exactly the keys [doc_start, t].
        for (int64_t k = 0; k < s; ++k)
          ASSERT_EQ(k <= t && k >= start[size_t(t)], bool(want.visible[size_t(t)][size_t(k)]))
              << "trial " << trial << " query " << t << " key " << k;
      }
      EXPECT_EQ(counted, want_counted);
    }
  }
}

}  // namespace document_masks_test
}  // namespace mt
