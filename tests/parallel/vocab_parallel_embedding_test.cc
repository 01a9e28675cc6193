// Vocab-parallel embedding (Megatron's VocabParallelEmbedding) built from the
// kernels: each TP rank holds rows [rank·v/tp, (rank+1)·v/tp) of the table;
// embedding_forward on the shard gives zero rows for other shards' ids and an
// all-reduce over TP completes the lookup; the backward (dout replicated, as
// the all-reduce's backward is the identity) scatters into the shard only.
// Run on the whole MPI world as the TP group (world 1, 2 and 4), against the
// unsharded lookup computed on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "parallel_test_util.h"
#include "comm/communicator.h"
#include "kernels/embedding.h"
#include "parallel/vocab_parallel_embedding.h"

namespace mt {
namespace vocab_parallel_embedding_test {

constexpr int64_t kN = 16, kV = 32, kH = 12;  // tokens (s·b), vocabulary, hidden

// Ids spread over the whole vocabulary (every quarter) with repeats, so the
// backward must accumulate several tokens into one row, within a shard.
std::vector<int32_t> make_ids() {
  std::vector<int32_t> ids(kN);
  for (int64_t i = 0; i < kN; ++i) ids[i] = int32_t((5 * i + 1) % kV);
  ids[14] = ids[2];  // 11: two tokens on one row
  ids[15] = ids[2];  //     and a third
  return ids;
}

TEST(VocabParallelEmbedding, IdsCoverEveryShardWithRepeats) {
  Communicator tp = Communicator::world();
  const int64_t v_l = kV / tp.size();
  std::vector<int> per_shard(tp.size(), 0);
  for (int32_t id : make_ids()) ++per_shard[id / v_l];
  for (int r = 0; r < tp.size(); ++r) EXPECT_GT(per_shard[r], 0) << "shard " << r;
}

TEST(VocabParallelEmbedding, ShardLookupThenAllReduceEqualsFullLookup) {
  Communicator tp = Communicator::world();
  const int64_t v_l = kV / tp.size(), row_start = tp.rank() * v_l;
  const std::vector<int32_t> ids = make_ids();
  const Vec table = random_vec(kV * kH, 9);  // (v, h)

  Vec full(kN * kH, kGarbage);
  embedding_forward(full.data(), ids.data(), table.data(), kN, kH, 0, kV, false);
  Vec want(kN * kH);
  for (int64_t i = 0; i < kN; ++i)
    std::copy(table.begin() + ids[i] * kH, table.begin() + (ids[i] + 1) * kH,
              want.begin() + i * kH);
  expect_close(full, want, "full lookup");

  const Vec shard(table.begin() + row_start * kH, table.begin() + (row_start + v_l) * kH);
  Vec out(kN * kH, kGarbage);  // `=`: other shards' rows must come out zero
  embedding_forward(out.data(), ids.data(), shard.data(), kN, kH, row_start, v_l, false);
  for (int64_t i = 0; i < kN; ++i) {
    const bool mine = ids[i] >= row_start && ids[i] < row_start + v_l;
    if (mine) continue;
    for (int64_t j = 0; j < kH; ++j)
      EXPECT_EQ(out[i * kH + j], 0.f) << "token " << i << " id " << ids[i];
  }
  tp.all_reduce_sum(out.data(), kN * kH);
  expect_close(out, want, "sharded lookup + all-reduce");

  // accumulate: out += shard lookup (e.g. adding onto position embeddings).
  Vec acc(kN * kH, 1.f);
  embedding_forward(acc.data(), ids.data(), shard.data(), kN, kH, row_start, v_l, true);
  tp.all_reduce_sum(acc.data(), kN * kH);
  for (float& w : want) w += float(tp.size());
  expect_close(acc, want, "sharded accumulate + all-reduce");
}

TEST(VocabParallelEmbedding, ShardBackwardEqualsRowBlockOfFullGradient) {
  Communicator tp = Communicator::world();
  const int64_t v_l = kV / tp.size(), row_start = tp.rank() * v_l;
  const std::vector<int32_t> ids = make_ids();
  const Vec dout = random_vec(kN * kH, 10);  // (n, h), replicated

  Vec dtable(kV * kH, 0.f);
  embedding_backward(dtable.data(), dout.data(), ids.data(), kN, kH, 0, kV);
  Vec want(kV * kH, 0.f);  // plain scatter-add
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < kH; ++j) want[ids[i] * kH + j] += dout[i * kH + j];
  expect_close(dtable, want, "full backward");

  const Vec d0 = random_vec(v_l * kH, 11);  // `+=`: start from a non-zero gradient
  Vec dshard = d0;
  embedding_backward(dshard.data(), dout.data(), ids.data(), kN, kH, row_start, v_l);
  Vec want_shard(want.begin() + row_start * kH, want.begin() + (row_start + v_l) * kH);
  for (size_t k = 0; k < want_shard.size(); ++k) want_shard[k] += d0[k];
  expect_close(dshard, want_shard, "shard backward");
}

// The src/parallel pair: replicated output (all-reduce) or, with sequence
// parallelism, this rank's slab of the full lookup (reduce-scatter); its
// backward from the replicated gradient or from the slabs (all-gathered)
// gives this shard's rows of the full gradient.
TEST(VocabParallelEmbedding, ForwardBackwardPairWithAndWithoutSequenceParallelism) {
  Communicator tp = Communicator::world();
  const int64_t v_l = kV / tp.size(), row_start = tp.rank() * v_l, slab = kN / tp.size();
  const std::vector<int32_t> ids = make_ids();
  const Vec table = random_vec(kV * kH, 9);
  const Vec shard(table.begin() + row_start * kH, table.begin() + (row_start + v_l) * kH);
  Vec want(kN * kH);
  for (int64_t i = 0; i < kN; ++i)
    std::copy(table.begin() + ids[i] * kH, table.begin() + (ids[i] + 1) * kH,
              want.begin() + i * kH);
  const Vec dout = random_vec(kN * kH, 10);  // the gradient of the full (n, h) output
  Vec dwant(v_l * kH, 0.f);
  for (int64_t i = 0; i < kN; ++i)
    if (ids[i] >= row_start && ids[i] < row_start + v_l)
      for (int64_t j = 0; j < kH; ++j) dwant[(ids[i] - row_start) * kH + j] += dout[i * kH + j];
  for (bool sp : {false, true}) {
    const TensorParallel par{&tp, sp};
    const int64_t rows = sp && tp.size() > 1 ? slab : kN, r0 = rows == kN ? 0 : tp.rank() * slab;
    Vec out(rows * kH, kGarbage), full(kN * kH, kGarbage);
    vocab_parallel_embedding_forward(out.data(), full.data(), ids.data(), shard.data(), kN, kH,
                                     row_start, v_l, par);
    expect_close(out, rows_of(want, kH, r0, rows), sp ? "SP slab" : "replicated");
    Vec dtable(v_l * kH, 0.f);
    const Vec dmine = rows_of(dout, kH, r0, rows);
    vocab_parallel_embedding_backward(dtable.data(), full.data(), dmine.data(), ids.data(), kN, kH,
                                      row_start, v_l, par);
    expect_close(dtable, dwant, sp ? "SP backward" : "backward");
  }
}

}  // namespace vocab_parallel_embedding_test
}  // namespace mt
