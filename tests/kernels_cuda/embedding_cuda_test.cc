// embedding's CUDA twin against its CPU code: whole tables and vocabulary
// shards (ids of other shards give zero rows), fp32 and bf16 tables, `=` and
// `+=` outputs, ids on the GPU and on the host, and the CPU's error for a
// negative id. Tolerances: the forward copies (and adds) values, so it must
// match exactly; the backward sums a row's positions in the CPU's order up to
// 8 repeats and in 8 interleaved partial sums beyond (a frequent token), so
// dtable is compared at 1e-5 (rel_max_err: max abs error over max |CPU value|)
// and two GPU runs must give the same bits.
#include "kernels/embedding.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace embedding_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::to_bf16;


// n ids in [0, v): scattered, with every fifth position the same id (a
// frequent token, several repeats per row of the backward), and `hot` extra
// repeats of id v - 1 spread over the positions.
std::vector<int32_t> make_ids(int64_t n, int64_t v, int64_t hot = 0) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[size_t(i)] = int32_t((uint64_t(i) * 2654435761u + 12345u) % uint64_t(v));
  for (int64_t i = 0; i < n; i += 5) ids[size_t(i)] = int32_t(v / 3);
  for (int64_t k = 0; k < hot && k * 3 + 1 < n; ++k) ids[size_t(k * 3 + 1)] = int32_t(v - 1);
  return ids;
}

// A table shard: rows [row_start, row_start + rows) of a v-row vocabulary.
struct Case {
  int64_t n, h, v, row_start, rows;
};
const Case kCases[] = {
    {37, 768, 1000, 0, 1000},   // the whole table
    {37, 100, 1000, 300, 400},  // a shard: most ids are another shard's
    {1, 1, 3, 1, 1},
    {257, 70, 50, 10, 35},      // h not a multiple of 32, many repeats
};

std::string name(const Case& c) {
  return "n=" + std::to_string(c.n) + " h=" + std::to_string(c.h) + " v=" + std::to_string(c.v) +
         " shard [" + std::to_string(c.row_start) + ", " + std::to_string(c.row_start + c.rows) +
         ")";
}

TEST(EmbeddingCuda, ForwardMatchesCpuExactly) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const auto ids = make_ids(c.n, c.v);
    const auto table = test::randn(c.rows * c.h, "emb.cuda.table");
    const auto table_b = to_bf16(table);
    OnGpu<int32_t> gids(ids);
    OnGpu<float> gtable(table);
    OnGpu<uint16_t> gtable_b(table_b);
    const auto base = test::randn(c.n * c.h, "emb.cuda.base");
    for (bool bf16 : {false, true}) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::string(bf16 ? "bf16 table" : "fp32 table") +
                     (accumulate ? ", +=" : ", ="));
        // `=` starts from NaN (every element must be written), `+=` from random values.
        auto want = accumulate ? base : std::vector<float>(base.size(), NAN);
        OnGpu<float> got(want);
        const ReadView t_cpu = bf16 ? ReadView(table_b.data()) : ReadView(table.data());
        const ReadView t_gpu = bf16 ? ReadView(gtable_b.get()) : ReadView(gtable.get());
        embedding_forward(want.data(), ids.data(), t_cpu, c.n, c.h, c.row_start, c.rows,
                          accumulate);
        embedding_forward(got.get(), gids.get(), t_gpu, c.n, c.h, c.row_start, c.rows,
                          accumulate);
        EXPECT_EQ(got.host(), want);
        // Ids on the host (a decoder's single token): checked there, copied to the GPU.
        OnGpu<float> got_h(accumulate ? base : std::vector<float>(base.size(), NAN));
        embedding_forward(got_h.get(), ids.data(), t_gpu, c.n, c.h, c.row_start, c.rows,
                          accumulate);
        EXPECT_EQ(got_h.host(), want) << "host ids";
      }
    }
  }
}

TEST(EmbeddingCuda, BackwardMatchesCpu) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const auto ids = make_ids(c.n, c.v);
    const auto dout = test::randn(c.n * c.h, "emb.cuda.dout");
    auto want = test::randn(c.rows * c.h, "emb.cuda.dt0");  // += onto random values
    OnGpu<int32_t> gids(ids);
    OnGpu<float> gdout(dout), got(want);
    embedding_backward(want.data(), dout.data(), ids.data(), c.n, c.h, c.row_start, c.rows);
    embedding_backward(got.get(), gdout.get(), gids.get(), c.n, c.h, c.row_start, c.rows);
    EXPECT_LE(rel_max_err(got.host(), want), 1e-5);
  }
}

// GPT-2's shape: 8192 tokens over a 50304-row table with a very frequent token
// (~1/5 of the positions) and another repeated 2000 times, h = 768.
TEST(EmbeddingCuda, BackwardFrequentTokensAndDeterminism) {
  MT_REQUIRE_GPU();
  const int64_t n = 8192, h = 768, v = 50304;
  const auto ids = make_ids(n, v, 2000);
  const auto dout = test::randn(n * h, "emb.cuda.big.dout");
  const auto dt0 = test::randn(v * h, "emb.cuda.big.dt0", 0.01f);
  auto want = dt0;
  embedding_backward(want.data(), dout.data(), ids.data(), n, h, 0, v);
  OnGpu<int32_t> gids(ids);
  OnGpu<float> gdout(dout), got(dt0), again(dt0);
  embedding_backward(got.get(), gdout.get(), gids.get(), n, h, 0, v);
  embedding_backward(again.get(), gdout.get(), gids.get(), n, h, 0, v);
  const auto first = got.host();
  EXPECT_LE(rel_max_err(first, want), 1e-5);
  EXPECT_EQ(again.host(), first) << "two runs differ: the backward is not deterministic";
}

TEST(EmbeddingCuda, NegativeIdIsTheCpusError) {
  MT_REQUIRE_GPU();
  const int64_t n = 40, h = 8, v = 16;
  auto ids = make_ids(n, v);
  ids[17] = -3;
  ids[31] = -1;  // the first one is named
  OnGpu<int32_t> gids(ids);
  OnGpu<float> table(test::randn(v * h, "emb.cuda.neg.table"));
  const std::vector<float> before(size_t(n * h), 7.f);
  OnGpu<float> out(before), dout(test::randn(n * h, "emb.cuda.neg.dout")), dtable(v * h);
  for (int pass = 0; pass < 2; ++pass) {
    const char* who = pass == 0 ? "embedding_forward" : "embedding_backward";
    try {
      if (pass == 0)
        embedding_forward(out.get(), gids.get(), table.get(), n, h, 0, v, true);
      else
        embedding_backward(dtable.get(), dout.get(), gids.get(), n, h, 0, v);
      ADD_FAILURE() << who << " accepted a negative id";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string(who) + ": token id -3 at position 17 is negative"),
                std::string::npos)
          << msg;
    }
  }
  EXPECT_EQ(out.host(), before) << "the output was written before the check";
  EXPECT_EQ(dtable.host(), std::vector<float>(size_t(v * h), 0.f));
}

}  // namespace embedding_cuda_test
}  // namespace mt
