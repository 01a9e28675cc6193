// Equivalence tests of the TP / SP communication mappings on the whole MPI
// world as the TP group (run plain, world 1, and under `mpirun -n 2` / `-n 4`).
// Every rank builds the inputs of *all* ranks from a fixed seed, so each can
// compute what every mapping must return. Each forward/backward pair is also
// checked to be adjoint: Σ_ranks <fwd(x), y> == Σ_ranks <x, bwd(y)>, which is
// what makes the backward the true gradient of the forward.
// All ranks make the same collective calls whatever fails (no ASSERT before a
// collective), so a failure on one rank never leaves another waiting.
#include "parallel/mappings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "parallel_test_util.h"

namespace mt {
namespace mappings_test {

constexpr int64_t kS = 8, kB = 2, kH = 12;  // activations (s, b, h); s divisible by 1, 2, 4

// One tensor per rank (rank r's from seed + r), known to every rank.
std::vector<std::vector<float>> per_rank(int tp, int64_t n, uint32_t seed) {
  std::vector<std::vector<float>> all;
  for (int r = 0; r < tp; ++r) all.push_back(random_vec(n, seed + 101u * uint32_t(r)));
  return all;
}

// Elementwise sum over ranks.
std::vector<float> sum_over(const std::vector<std::vector<float>>& all) {
  std::vector<float> s(all[0].size(), 0.f);
  for (const auto& v : all)
    for (size_t i = 0; i < s.size(); ++i) s[i] += v[i];
  return s;
}

// got (n) ≈ want (n) within rtol of want's largest magnitude.
void expect_close(const float* got, const float* want, int64_t n, const char* what,
                  double rtol = 1e-5) {
  double scale = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double(want[i])));
  const double tol = rtol * std::max(scale, 1e-30);
  int64_t bad = 0, worst = -1;
  double worst_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (!(err <= tol)) {
      ++bad;
      if (!(err <= worst_err)) worst_err = err, worst = i;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " differ; worst at " << worst
                    << ": got " << (worst >= 0 ? got[worst] : 0.f) << " want "
                    << (worst >= 0 ? want[worst] : 0.f) << " (tol " << tol << ")";
}

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Σ over ranks of a local double (exact enough for the adjoint checks).
double sum_ranks(double x, const Communicator& c) {
  c.all_reduce_sum(&x, 1);
  return x;
}

struct Sizes {
  int tp, rank;
  int64_t full_n, slab_n;
};

Sizes sizes_of(const Communicator& c) {
  const int64_t full_n = kS * kB * kH;
  return {c.size(), c.rank(), full_n, full_n / c.size()};
}

TEST(Mappings, WorldSizeDividesTheSequence) {
  Communicator tp = Communicator::world();
  EXPECT_EQ(kS % tp.size(), 0) << "these tests need a world size dividing s=" << kS;
}

// copy_to_tp_region — fwd: identity; bwd: all-reduce. The backward sums the
// per-rank gradients of the replicated input.
TEST(Mappings, CopyToTpRegionBackwardSumsGradients) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const auto dx_all = per_rank(z.tp, z.full_n, 11);
  std::vector<float> dx = dx_all[z.rank];
  copy_to_tp_region_backward(dx.data(), z.full_n, tp);
  const std::vector<float> want = sum_over(dx_all);
  expect_close(dx.data(), want.data(), z.full_n, "copy_to_tp_region bwd");

  // Adjoint: the forward is the identity onto every rank, x replicated:
  // Σ_r <x, dy_r> == <x, bwd(dy)> (the replicated input counted once).
  const std::vector<float> x = random_vec(z.full_n, 12);
  const double lhs = sum_ranks(dot(x.data(), dx_all[z.rank].data(), z.full_n), tp);
  const double rhs = dot(x.data(), dx.data(), z.full_n);
  EXPECT_NEAR(lhs, rhs, 1e-5 * (std::fabs(rhs) + 1));
}

// reduce_from_tp_region — fwd: all-reduce; bwd: identity.
TEST(Mappings, ReduceFromTpRegionForwardSumsPartials) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const auto x_all = per_rank(z.tp, z.full_n, 21);
  std::vector<float> y = x_all[z.rank];
  reduce_from_tp_region_forward(y.data(), z.full_n, tp);
  const std::vector<float> want = sum_over(x_all);
  expect_close(y.data(), want.data(), z.full_n, "reduce_from_tp_region fwd");

  // Adjoint with an identity backward: the output is replicated, so with
  // one upstream gradient dy (the same on every rank, as after a replicated
  // loss) Σ_r <x_r, dy> == <Σ_r x_r, dy>.
  const std::vector<float> dy = random_vec(z.full_n, 22);
  const double lhs = sum_ranks(dot(x_all[z.rank].data(), dy.data(), z.full_n), tp);
  EXPECT_NEAR(lhs, dot(y.data(), dy.data(), z.full_n), 1e-5 * (std::fabs(lhs) + 1));
}

// gather_from_sequence_parallel_region — fwd: all-gather along s;
// bwd: reduce-scatter along s.
TEST(Mappings, GatherFromSpRegionForwardAndBackward) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const std::vector<float> x = random_vec(z.full_n, 31);  // the full tensor (s, b, h)
  const float* my_slab = x.data() + z.rank * z.slab_n;    // (s/tp, b, h)
  std::vector<float> full(static_cast<size_t>(z.full_n), 777.f);
  gather_from_sp_region_forward(full.data(), my_slab, z.slab_n, tp);
  expect_close(full.data(), x.data(), z.full_n, "gather_from_sp_region fwd");

  // Backward: each rank's gradient of the full tensor differs; the slab
  // gradient is this rank's slab of their sum.
  const auto dfull_all = per_rank(z.tp, z.full_n, 32);
  std::vector<float> dslab(static_cast<size_t>(z.slab_n), 777.f);
  gather_from_sp_region_backward(dslab.data(), dfull_all[z.rank].data(), z.slab_n, tp);
  const std::vector<float> dsum = sum_over(dfull_all);
  expect_close(dslab.data(), dsum.data() + z.rank * z.slab_n, z.slab_n,
               "gather_from_sp_region bwd");

  // Adjoint: Σ_r <full, dfull_r> == Σ_r <slab_r, dslab_r>.
  const double lhs = sum_ranks(dot(full.data(), dfull_all[z.rank].data(), z.full_n), tp);
  const double rhs = sum_ranks(dot(my_slab, dslab.data(), z.slab_n), tp);
  EXPECT_NEAR(lhs, rhs, 1e-5 * (std::fabs(lhs) + 1));
}

// gather_from_sp_region's forward accepts its own slab in place inside `full`.
TEST(Mappings, GatherFromSpRegionInPlaceSlab) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const std::vector<float> x = random_vec(z.full_n, 35);
  std::vector<float> full(static_cast<size_t>(z.full_n), 777.f);
  std::copy(x.begin() + z.rank * z.slab_n, x.begin() + (z.rank + 1) * z.slab_n,
            full.begin() + z.rank * z.slab_n);
  gather_from_sp_region_forward(full.data(), full.data() + z.rank * z.slab_n, z.slab_n, tp);
  expect_close(full.data(), x.data(), z.full_n, "gather_from_sp_region fwd in place");
}

// reduce_scatter_to_sequence_parallel_region — fwd: reduce-scatter along s;
// bwd: all-gather along s.
TEST(Mappings, ReduceScatterToSpRegionForwardAndBackward) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const auto partial_all = per_rank(z.tp, z.full_n, 41);  // per-rank partial sums (s, b, h)
  std::vector<float> slab(static_cast<size_t>(z.slab_n), 777.f);
  reduce_scatter_to_sp_region_forward(slab.data(), partial_all[z.rank].data(), z.slab_n, tp);
  const std::vector<float> sum = sum_over(partial_all);
  expect_close(slab.data(), sum.data() + z.rank * z.slab_n, z.slab_n,
               "reduce_scatter_to_sp_region fwd");

  const std::vector<float> dy = random_vec(z.full_n, 42);  // the full gradient, slab r on rank r
  std::vector<float> dfull(static_cast<size_t>(z.full_n), 777.f);
  reduce_scatter_to_sp_region_backward(dfull.data(), dy.data() + z.rank * z.slab_n, z.slab_n,
                                       tp);
  expect_close(dfull.data(), dy.data(), z.full_n, "reduce_scatter_to_sp_region bwd");

  // Adjoint: Σ_r <slab_r, dslab_r> == Σ_r <partial_r, dfull>.
  const double lhs =
      sum_ranks(dot(slab.data(), dy.data() + z.rank * z.slab_n, z.slab_n), tp);
  const double rhs = sum_ranks(dot(partial_all[z.rank].data(), dfull.data(), z.full_n), tp);
  EXPECT_NEAR(lhs, rhs, 1e-5 * (std::fabs(lhs) + 1));
}

// scatter_to_sequence_parallel_region — fwd: keep this rank's slab;
// bwd: all-gather along s.
TEST(Mappings, ScatterToSpRegionForwardAndBackward) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const std::vector<float> x = random_vec(z.full_n, 51);  // replicated full input
  std::vector<float> slab(static_cast<size_t>(z.slab_n), 777.f);
  scatter_to_sp_region_forward(slab.data(), x.data(), z.slab_n, tp);
  expect_close(slab.data(), x.data() + z.rank * z.slab_n, z.slab_n,
               "scatter_to_sp_region fwd");

  const auto dslab_all = per_rank(z.tp, z.slab_n, 52);
  std::vector<float> dfull(static_cast<size_t>(z.full_n), 777.f);
  scatter_to_sp_region_backward(dfull.data(), dslab_all[z.rank].data(), z.slab_n, tp);
  std::vector<float> want;
  for (const auto& d : dslab_all) want.insert(want.end(), d.begin(), d.end());
  expect_close(dfull.data(), want.data(), z.full_n, "scatter_to_sp_region bwd");

  // Adjoint: Σ_r <slab_r, dslab_r> == <x, dfull> (replicated x counted once).
  const double lhs = sum_ranks(dot(slab.data(), dslab_all[z.rank].data(), z.slab_n), tp);
  EXPECT_NEAR(lhs, dot(x.data(), dfull.data(), z.full_n), 1e-5 * (std::fabs(lhs) + 1));
}

// Scatter then gather is the identity on a replicated tensor, and
// reduce-scatter then gather equals the all-reduce (Megatron's SP identity
// all_reduce == all_gather ∘ reduce_scatter).
TEST(Mappings, ScatterGatherRoundTripsAndReduceScatterGatherIsAllReduce) {
  Communicator tp = Communicator::world();
  const Sizes z = sizes_of(tp);
  const std::vector<float> x = random_vec(z.full_n, 61);
  std::vector<float> slab(static_cast<size_t>(z.slab_n)), full(static_cast<size_t>(z.full_n));
  scatter_to_sp_region_forward(slab.data(), x.data(), z.slab_n, tp);
  gather_from_sp_region_forward(full.data(), slab.data(), z.slab_n, tp);
  expect_close(full.data(), x.data(), z.full_n, "gather(scatter(x))");

  const auto part_all = per_rank(z.tp, z.full_n, 62);
  reduce_scatter_to_sp_region_forward(slab.data(), part_all[z.rank].data(), z.slab_n, tp);
  gather_from_sp_region_forward(full.data(), slab.data(), z.slab_n, tp);
  std::vector<float> reduced = part_all[z.rank];
  reduce_from_tp_region_forward(reduced.data(), z.full_n, tp);
  expect_close(full.data(), reduced.data(), z.full_n, "gather(reduce_scatter(x)) vs all-reduce");
}

}  // namespace mappings_test
}  // namespace mt
