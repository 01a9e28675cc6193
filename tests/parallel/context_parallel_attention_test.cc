// Ring attention over the world as the CP group (run plain, world 1, and under
// `mpirun -n 2` / `-n 4`): each rank's chunks i and 2·CP-1-i of the output,
// log-sum-exp and q/k/v gradients equal the one-rank attention of the whole
// sequence (dropout on, keyed by global positions). Also the chunk helpers
// the data loader and the model use.
#include "parallel/context_parallel_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "parallel_test_util.h"

namespace mt {
namespace {

// The chunk layout: every position is held by exactly one rank, rank i holds
// chunks i and 2·CP-1-i, in order, and the selected tokens are those positions.
TEST(ContextParallelChunks, EveryPositionOnceAndBalanced) {
  for (int64_t cp : {1, 2, 3, 4}) {
    const int64_t s = 2 * cp * 3;
    std::vector<int> owner(size_t(s), 0);
    std::vector<int32_t> tokens(static_cast<size_t>(s));
    for (int64_t t = 0; t < s; ++t) tokens[size_t(t)] = int32_t(100 + t);
    for (int64_t r = 0; r < cp; ++r) {
      std::vector<int32_t> mine(size_t(s / cp));
      if (cp > 1) {
        cp_select_chunks(mine.data(), tokens.data(), s, cp, r);
      } else {
        mine = tokens;
      }
      int64_t causal_work = 0;  // keys visible to this rank's queries
      for (int64_t row = 0; row < s / cp; ++row) {
        const int64_t pos = cp_global_position(cp, r, s / cp, row);
        ++owner[size_t(pos)];
        EXPECT_EQ(mine[size_t(row)], 100 + pos) << cp << " " << r << " " << row;
        causal_work += pos + 1;
      }
      // Chunks i and 2·CP-1-i: Σ (pos + 1) = (2·CP-1)·c² + c(c+1) for every rank.
      EXPECT_EQ(causal_work, (2 * cp - 1) * 9 + 3 * 4) << "rank " << r << " of CP " << cp;
      if (cp > 1) {
        EXPECT_EQ(cp_chunk_pos0(cp, r, 3, 0), r * 3);
        EXPECT_EQ(cp_chunk_pos0(cp, r, 3, 1), (2 * cp - 1 - r) * 3);
      }
    }
    for (int64_t t = 0; t < s; ++t) EXPECT_EQ(owner[size_t(t)], 1) << cp << " position " << t;
  }
}

// (b, a, S, d) → this rank's chunk-major (2, b, a, c, d).
Vec local_chunks(const Vec& full, int64_t b, int64_t a, int64_t S, int64_t d, int64_t cp,
                 int64_t rank, int64_t row_len) {
  const int64_t c = S / (2 * cp);
  Vec out;
  for (int64_t j = 0; j < 2; ++j) {
    const int64_t p0 = cp_chunk_pos0(cp, rank, c, j);
    for (int64_t bh = 0; bh < b * a; ++bh)
      out.insert(out.end(), full.begin() + (bh * S + p0) * row_len,
                 full.begin() + (bh * S + p0 + c) * row_len);
  }
  (void)d;
  return out;
}

// (batches, a, rows, d) → the sum over each group's a/g heads: (batches, g, rows, d).
Vec group_sums(const Vec& x, int64_t batches, int64_t a, int64_t g, int64_t cd) {
  Vec out(static_cast<size_t>(batches * g * cd), 0.f);
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t hi = 0; hi < a; ++hi)
      for (int64_t i = 0; i < cd; ++i)
        out[size_t((bi * g + hi / (a / g)) * cd + i)] += x[size_t((bi * a + hi) * cd + i)];
  return out;
}

// k, v (b, a, S, d) with each group's values repeated for its heads (as
// qkv_to_heads makes them), from (b, g, S, d) random values.
Vec repeated_groups(int64_t b, int64_t a, int64_t g, int64_t S, int64_t d, uint32_t seed) {
  const Vec groups = random_vec(b * g * S * d, seed);
  Vec out;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < a; ++hi)
      out.insert(out.end(), groups.begin() + (bi * g + hi / (a / g)) * S * d,
                 groups.begin() + (bi * g + hi / (a / g) + 1) * S * d);
  return out;
}

// Without (g = a) and with grouped-query attention (g = 2 of 4 heads: only
// the groups travel; dk, dv compared as each group's sum over its heads).
TEST(ContextParallelAttention, RingEqualsTheWholeSequence) {
  Communicator world = Communicator::world();
  const int64_t cp = world.size(), me = world.rank();
  const int64_t b = 2, a = 4, d = 8, c = 5, S = 2 * cp * c;
  AttentionDropout drop;
  drop.rng = RngStream::make(7, "cp_attention_test", 3);
  drop.p = 0.2f;
  drop.a_global = a;
  ContextParallel group{&world};
  AttentionDims local;
  local.b = b;
  local.a = a;
  local.s = S / cp;
  local.d = d;
  local.s_global = S;
  if (cp == 1) {  // one rank: the ring is not the path (gpt_layer calls attention_forward)
    Vec ws(size_t(context_parallel_attention_workspace_floats(local, a)));
    Vec x(size_t(b * a * S * d)), lse(size_t(b * a * S));
    EXPECT_THROW(context_parallel_attention_forward(x.data(), lse.data(), x.data(), x.data(),
                                                    x.data(), local, a, drop, group, ws.data()),
                 Error);
    return;
  }
  for (int64_t g : {a, int64_t(2)}) {
    SCOPED_TRACE("query groups " + std::to_string(g));
    const int64_t n = b * a * S * d;
    const Vec q = random_vec(n, 1), k = repeated_groups(b, a, g, S, d, 2),
              v = repeated_groups(b, a, g, S, d, 3), dctx = random_vec(n, 4);
    // One rank's attention of the whole sequence.
    AttentionDims whole;
    whole.b = b;
    whole.a = a;
    whole.s = S;
    whole.d = d;
    Vec ws_whole(size_t(attention_workspace_floats(whole)));
    const size_t nz = static_cast<size_t>(n);
    Vec ctx(nz), lse(static_cast<size_t>(b * a * S)), dq(nz), dk(nz), dv(nz);
    attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), whole, drop,
                      ws_whole.data());
    attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.data(), k.data(),
                       v.data(), ctx.data(), lse.data(), whole, drop, ws_whole.data());
    // The ring, from this rank's chunks.
    auto mine = [&](const Vec& full, int64_t row_len) {
      return local_chunks(full, b, a, S, d, cp, me, row_len);
    };
    const Vec lq = mine(q, d), lk = mine(k, d), lv = mine(v, d), ldctx = mine(dctx, d);
    const int64_t ln = n / cp;
    Vec ws(size_t(context_parallel_attention_workspace_floats(local, g)));
    Vec lctx(size_t(ln), kGarbage), llse(size_t(ln / d), kGarbage);
    context_parallel_attention_forward(lctx.data(), llse.data(), lq.data(), lk.data(), lv.data(),
                                       local, g, drop, group, ws.data());
    expect_close(lctx, mine(ctx, d), "ctx");
    expect_close(llse, mine(lse, 1), "lse");
    Vec ldq(size_t(ln), kGarbage), ldk(size_t(ln), kGarbage), ldv(size_t(ln), kGarbage);
    context_parallel_attention_backward(ldq.data(), ldk.data(), ldv.data(), ldctx.data(),
                                        lq.data(), lk.data(), lv.data(), lctx.data(),
                                        llse.data(), local, g, drop, group, ws.data());
    expect_close(ldq, mine(dq, d), "dq", 1e-4);
    const int64_t cd = S / cp / 2 * d;  // one chunk's rows of one head
    expect_close(group_sums(ldk, 2 * b, a, g, cd), group_sums(mine(dk, d), 2 * b, a, g, cd), "dk",
                 1e-4);
    expect_close(group_sums(ldv, 2 * b, a, g, cd), group_sums(mine(dv, d), 2 * b, a, g, cd), "dv",
                 1e-4);
  }
}

}  // namespace
}  // namespace mt
