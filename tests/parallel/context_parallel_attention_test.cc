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
namespace context_parallel_attention_test {

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

// Chunk-major heads (2, b, a, c, d) → the projection's (2c, b, a·d) rows.
Vec heads_to_sbh_rows(const Vec& x, int64_t b, int64_t a, int64_t c, int64_t d) {
  Vec out(x.size());
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = 0; hi < a; ++hi)
        for (int64_t p = 0; p < c; ++p)
          for (int64_t t = 0; t < d; ++t)
            out[size_t(((j * c + p) * b + bi) * a * d + hi * d + t)] =
                x[size_t((((j * b + bi) * a + hi) * c + p) * d + t)];
  return out;
}

std::vector<uint16_t> to_bf16(const Vec& x) {
  std::vector<uint16_t> out(x.size());
  f32_to_bf16(out.data(), x.data(), int64_t(x.size()));
  return out;
}

// The storage a run of `math` keeps q, k, v in: bf16 in bf16 math.
struct Stored {
  Vec f32;
  std::vector<uint16_t> bf16;
  Stored(const Vec& x, MathMode math) {
    if (math == MathMode::kBF16)
      bf16 = to_bf16(x);
    else
      f32 = x;
  }
  ReadView view() const { return bf16.empty() ? ReadView(f32.data()) : ReadView(bf16.data()); }
};

// Tolerances relative to each tensor's largest magnitude: fp32 is round-off
// only (the blocks merge in another order: 1e-5 forward, 1e-4 gradients).
// bf16: both sides read the same bf16 q, k, v, but the probabilities are
// rounded to bf16 (2^-9 relative) per block against the block's own
// log-sum-exp in the ring and against the row's in the whole attention, the
// context gradient is rounded for every block's products, and the ring takes
// D from the bf16-rounded ctx, not from the rounded dP: elements differ by a
// few bf16 ulps of the largest value (measured worst: 3.4e-3 ctx, 7.1e-3
// gradients at 2 and 4 ranks); 1e-2 and 2e-2 are above that and well below
// the errors of a wrong merge, mask or dropout key (O(1)).
struct RingTolerance {
  double fwd, bwd;
};

// Without (g = a) and with grouped-query attention (g = 2 of 4 heads: only
// the groups travel; dk, dv compared as each group's sum over its heads), in
// fp32 and in bf16 math with bf16 q/k/v storage (bf16 K/V on the ring); and
// with v and ctx heads of dv = 6 against q and k heads of 8 (multi-latent
// attention's shape).
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
  // Documents inside the sequence (--reset-attention-mask): sample 0 has
  // boundaries inside chunks and at a chunk's edge, sample 1 one document
  // starting in the middle, so some ring blocks see no key of some rows.
  std::vector<int32_t> doc_start(size_t(b * S), 0);
  for (int64_t t = 0; t < S; ++t) {
    doc_start[size_t(t)] = int32_t(t >= 2 * c ? 2 * c : t >= 3 ? 3 : 0);
    doc_start[size_t(S + t)] = int32_t(t >= S / 2 + 1 ? S / 2 + 1 : 0);
  }
  for (const int64_t dh : {d, int64_t(6)})
  for (const bool docs : {false, true})
  for (const MathMode math : {MathMode::kF32, MathMode::kBF16})
    for (int64_t g : {a, int64_t(2)}) {
      if (docs && math == MathMode::kBF16) continue;
      if (dh != d && docs) continue;
      SCOPED_TRACE(std::string(math_mode_name(math)) + " query groups " + std::to_string(g) +
                   (docs ? " with documents" : "") + " dv " + std::to_string(dh));
      local.doc_start = docs ? doc_start.data() : nullptr;
      local.dv = dh;
      const RingTolerance tol = math == MathMode::kBF16 ? RingTolerance{1e-2, 2e-2}
                                                        : RingTolerance{1e-5, 1e-4};
      const int64_t n = b * a * S * d, nv = b * a * S * dh;
      const Vec q = random_vec(n, 1), k = repeated_groups(b, a, g, S, d, 2),
                v = repeated_groups(b, a, g, S, dh, 3), dctx = random_vec(nv, 4);
      // One rank's attention of the whole sequence.
      AttentionDims whole;
      whole.b = b;
      whole.a = a;
      whole.s = S;
      whole.d = d;
      whole.dv = dh;
      whole.math = math;
      whole.doc_start = local.doc_start;
      local.math = math;
      Vec ws_whole(size_t(attention_workspace_floats(whole)));
      const size_t nz = static_cast<size_t>(n), nvz = static_cast<size_t>(nv);
      Vec ctx(nvz), lse(static_cast<size_t>(b * a * S)), dq(nz), dk(nz), dv(nvz);
      const Stored sq(q, math), sk(k, math), sv(v, math);
      attention_forward(ctx.data(), lse.data(), sq.view(), sk.view(), sv.view(), whole, drop,
                        ws_whole.data());
      attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), sq.view(), sk.view(),
                         sv.view(), ctx.data(), lse.data(), whole, drop, ws_whole.data());
      // The ring, from this rank's chunks.
      auto mine = [&](const Vec& full, int64_t row_len) {
        return local_chunks(full, b, a, S, d, cp, me, row_len);
      };
      const Stored lq(mine(q, d), math), lk(mine(k, d), math), lv(mine(v, dh), math);
      const Vec ldctx = mine(dctx, dh);
      const int64_t ln = n / cp, lnv = nv / cp;
      Vec ws(size_t(context_parallel_attention_workspace_floats(local, g)) + 1024, kGarbage);
      Vec lctx(size_t(lnv), kGarbage), llse(size_t(ln / d), kGarbage);
      // Bytes on the wire, counted by the communicator: forward (CP-1) K|V
      // messages, backward (CP-1) K|V and CP dK|dV, each b·g·(S/CP)·(d + dv)
      // elements (K|V as stored: 2 bytes in bf16; dK|dV 4).
      const int64_t msg = b * g * (S / cp) * (d + dh), kv_bytes = math == MathMode::kBF16 ? 2 : 4;
      world.reset_sent_bytes();
      context_parallel_attention_forward(lctx.data(), llse.data(), lq.view(), lk.view(),
                                         lv.view(), local, g, drop, group, ws.data());
      EXPECT_EQ(world.sent_bytes(), (cp - 1) * msg * kv_bytes);
      EXPECT_EQ(context_parallel_ring_bytes(local, g, cp, false), (cp - 1) * msg * kv_bytes);
      expect_close(lctx, mine(ctx, dh), "ctx", tol.fwd);
      expect_close(llse, mine(lse, 1), "lse", 1e-5);
      // The projection's input: fp32, or (bf16 runs) its bf16 rounding.
      const Vec sbh = heads_to_sbh_rows(lctx, b, a, S / cp / 2, dh);
      const Stored ctx_sbh(sbh, math);
      Vec ldq(size_t(ln), kGarbage), ldk(size_t(ln), kGarbage), ldv(size_t(lnv), kGarbage);
      world.reset_sent_bytes();
      context_parallel_attention_backward(ldq.data(), ldk.data(), ldv.data(), ldctx.data(),
                                          lq.view(), lk.view(), lv.view(), ctx_sbh.view(),
                                          llse.data(), local, g, drop, group, ws.data());
      EXPECT_EQ(world.sent_bytes(), (cp - 1) * msg * kv_bytes + cp * msg * 4);
      EXPECT_EQ(context_parallel_ring_bytes(local, g, cp, true),
                (cp - 1) * msg * kv_bytes + cp * msg * 4);
      expect_close(ldq, mine(dq, d), "dq", tol.bwd);
      const int64_t cd = S / cp / 2 * d, cdv = S / cp / 2 * dh;  // one chunk's rows of one head
      expect_close(group_sums(ldk, 2 * b, a, g, cd), group_sums(mine(dk, d), 2 * b, a, g, cd),
                   "dk", tol.bwd);
      expect_close(group_sums(ldv, 2 * b, a, g, cdv), group_sums(mine(dv, dh), 2 * b, a, g, cdv),
                   "dv", tol.bwd);
      // The workspace formula covers what the ring wrote: the tail is untouched.
      const size_t used = ws.size() - 1024;
      for (size_t i = used; i < ws.size(); ++i)
        ASSERT_EQ(ws[i], kGarbage) << "workspace overrun at " << i;
    }
}

// A bf16 ring refuses fp32 q/k/v (and the other way round): the K/V travel
// as stored, so storage and math must agree.
TEST(ContextParallelAttention, StorageMustMatchTheMath) {
  Communicator world = Communicator::world();  // any size: the check comes before the ring
  ContextParallel group{&world};
  AttentionDims local;
  local.b = 1;
  local.a = 2;
  local.s = 4;
  local.d = 4;
  local.s_global = 4 * world.size();
  local.math = MathMode::kBF16;
  Vec ws(size_t(context_parallel_attention_workspace_floats(local, 2)));
  Vec x(size_t(1 * 2 * 4 * 4)), lse(size_t(1 * 2 * 4));
  AttentionDropout drop;
  try {
    context_parallel_attention_forward(x.data(), lse.data(), x.data(), x.data(), x.data(), local,
                                       2, drop, group, ws.data());
    ADD_FAILURE() << "fp32 q/k/v in bf16 math accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match bf16 math"), std::string::npos)
        << e.what();
  }
}

}  // namespace context_parallel_attention_test
}  // namespace mt
