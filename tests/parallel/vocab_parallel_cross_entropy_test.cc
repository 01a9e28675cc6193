// Equivalence tests of the vocab-parallel cross-entropy on the whole MPI world
// as the TP group (plain run = world 1; CTest also runs `mpirun -n 2`, `-n 4`).
// Every rank builds the same full logits (n, v) and targets from a fixed seed,
// runs softmax_cross_entropy on the full logits (the unsharded reference),
// takes its vocabulary shard of columns [rank·v/tp, (rank+1)·v/tp) and checks
// that the losses equal the full ones on every rank and that its shard's
// in-place gradient equals the column block of the full gradient.
// All ranks make the same collective calls whatever fails.
#include "parallel_test_util.h"
#include "parallel/vocab_parallel_cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cross_entropy.h"

namespace mt {
namespace vocab_parallel_cross_entropy_test {

constexpr int64_t kN = 16, kV = 32;  // rows (s·b), vocabulary; kV divisible by 1, 2, 4

// Logits (n, v) in [-3, 3), with a per-quarter offset so that the shards'
// local row maxima differ widely (a shard using its own max instead of the
// global one gives a wrong softmax), and one row far from zero (stability).
Vec make_logits(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  Vec z(static_cast<size_t>(kN * kV));
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < kV; ++j)
      z[i * kV + j] = dist(gen) + 4.f * float((i + j / (kV / 4)) % 4);
  for (int64_t j = 0; j < kV; ++j) z[3 * kV + j] += 90.f;
  return z;
}

// Targets t_i = (7i + 3) mod v: 16 distinct ids with four in each quarter of
// the vocabulary, so every shard of a TP group of 1, 2 or 4 owns some.
std::vector<int32_t> make_targets() {
  std::vector<int32_t> t(kN);
  for (int64_t i = 0; i < kN; ++i) t[i] = int32_t((7 * i + 3) % kV);
  return t;
}

struct Scratch {
  std::vector<float> row_max = std::vector<float>(kN, kGarbage);
  std::vector<double> sum_exp = std::vector<double>(kN, kGarbage);
  std::vector<double> target_logit = std::vector<double>(kN, kGarbage);
  CrossEntropyScratch view() { return {row_max.data(), sum_exp.data(), target_logit.data()}; }
};

TEST(VocabParallelCrossEntropy, TargetsCoverEveryShard) {
  Communicator tp = Communicator::world();
  const int64_t v_l = kV / tp.size();
  std::vector<int> per_shard(tp.size(), 0);
  for (int32_t t : make_targets()) ++per_shard[t / v_l];
  for (int r = 0; r < tp.size(); ++r) EXPECT_GT(per_shard[r], 0) << "shard " << r;
}

// Losses on every rank and each shard's gradient equal the unsharded ones,
// for a gradient scale (1/n, as for a mean loss) and without gradient.
TEST(VocabParallelCrossEntropy, MatchesFullSoftmaxCrossEntropy) {
  Communicator tp = Communicator::world();
  const int64_t t = tp.size(), r = tp.rank(), v_l = kV / t, v_start = r * v_l;
  const std::vector<int32_t> targets = make_targets();
  const Vec logits = make_logits(5);
  for (float grad_scale : {1.f / float(kN), 0.f}) {
    SCOPED_TRACE("grad_scale " + std::to_string(grad_scale));
    Vec full = logits, full_losses(kN, kGarbage);
    softmax_cross_entropy(full_losses.data(), full.data(), targets.data(), kN, kV, grad_scale);

    Vec shard = cols_of(logits, kN, kV, v_start, v_l), losses(kN, kGarbage);
    Scratch s;
    vocab_parallel_cross_entropy(losses.data(), shard.data(), shard.data(), targets.data(), kN,
                                 v_l, v_start, kV, grad_scale, s.view(), &tp);
    expect_close(losses, full_losses, "losses");
    // With grad_scale 0 the logits are left alone (full is unchanged too).
    expect_close(shard, cols_of(full, kN, kV, v_start, v_l), "gradient shard");
    for (float l : losses) EXPECT_TRUE(std::isfinite(l) && l > 0.f) << l;
  }
}

// Direct check of the reference too, in double: the loss is
// log Σ exp(z) - z_target, and the gradient rows sum to zero.
TEST(VocabParallelCrossEntropy, LossesMatchDoublePrecisionFormula) {
  Communicator tp = Communicator::world();
  const int64_t t = tp.size(), r = tp.rank(), v_l = kV / t, v_start = r * v_l;
  const std::vector<int32_t> targets = make_targets();
  const Vec logits = make_logits(6);
  Vec shard = cols_of(logits, kN, kV, v_start, v_l), losses(kN, kGarbage);
  Scratch s;
  vocab_parallel_cross_entropy(losses.data(), shard.data(), shard.data(), targets.data(), kN, v_l,
                               v_start, kV, 1.f, s.view(), &tp);
  Vec want(kN);
  for (int64_t i = 0; i < kN; ++i) {
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < kV; ++j) mx = std::max(mx, double(logits[i * kV + j]));
    for (int64_t j = 0; j < kV; ++j) sum += std::exp(double(logits[i * kV + j]) - mx);
    want[i] = float(std::log(sum) + mx - double(logits[i * kV + targets[i]]));
  }
  expect_close(losses, want, "losses vs double formula");

  // Σ_j grad(i, j) = Σ softmax - 1 = 0 once summed over the shards.
  std::vector<double> row_sum(kN, 0.0);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < v_l; ++j) row_sum[i] += shard[i * v_l + j];
  tp.all_reduce_sum(row_sum.data(), kN);
  for (int64_t i = 0; i < kN; ++i) EXPECT_NEAR(row_sum[i], 0.0, 1e-5) << "row " << i;
}

// Without a group (tp == nullptr) the whole vocabulary is one shard: the
// result equals softmax_cross_entropy.
TEST(VocabParallelCrossEntropy, NoGroupEqualsFullSoftmaxCrossEntropy) {
  const std::vector<int32_t> targets = make_targets();
  const Vec logits = make_logits(8);
  Vec full = logits, full_losses(kN, kGarbage), z = logits, losses(kN, kGarbage);
  softmax_cross_entropy(full_losses.data(), full.data(), targets.data(), kN, kV, 0.5f);
  Scratch s;
  vocab_parallel_cross_entropy(losses.data(), z.data(), z.data(), targets.data(), kN, kV, 0, kV, 0.5f,
                               s.view(), nullptr);
  expect_close(losses, full_losses, "losses, no group");
  expect_close(z, full, "gradient, no group");
}

// A bf16 gradient (a bf16 run's output layer reads it so) is the fp32
// in-place gradient rounded once, bit for bit, with the same losses: at one
// rank through the fused row path, at 2 and 4 through the three phases.
TEST(VocabParallelCrossEntropy, Bf16GradientIsTheRoundedFp32One) {
  Communicator tp = Communicator::world();
  const int64_t t = tp.size(), r = tp.rank(), v_l = kV / t, v_start = r * v_l;
  const std::vector<int32_t> targets = make_targets();
  const Vec logits = make_logits(9);
  Vec in_place = cols_of(logits, kN, kV, v_start, v_l), losses(kN, kGarbage);
  Scratch s;
  vocab_parallel_cross_entropy(losses.data(), in_place.data(), in_place.data(), targets.data(), kN,
                               v_l, v_start, kV, 0.25f, s.view(), &tp);
  Vec shard = cols_of(logits, kN, kV, v_start, v_l), losses16(kN, kGarbage);
  std::vector<uint16_t> g16(size_t(kN * v_l), 0xFFFF);
  Scratch s16;
  vocab_parallel_cross_entropy(losses16.data(), shard.data(), g16.data(), targets.data(), kN, v_l,
                               v_start, kV, 0.25f, s16.view(), &tp);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(losses16[i], losses[i]) << "row " << i;
  for (int64_t k = 0; k < kN * v_l; ++k)
    ASSERT_EQ(g16[size_t(k)], bf16_from_f32(in_place[size_t(k)])) << "element " << k;
}

// A target outside [0, v) throws mt::Error on every rank (the check runs
// before any collective, so no rank is left waiting), naming the id.
TEST(VocabParallelCrossEntropy, TargetOutOfRangeThrows) {
  Communicator tp = Communicator::world();
  const int64_t t = tp.size(), r = tp.rank(), v_l = kV / t, v_start = r * v_l;
  const Vec logits = make_logits(7);
  for (int32_t bad : {int32_t(kV), int32_t(-1), int32_t(kV + 100)}) {
    std::vector<int32_t> targets = make_targets();
    targets[5] = bad;
    Vec shard = cols_of(logits, kN, kV, v_start, v_l), losses(kN, kGarbage);
    Scratch s;
    std::string msg;
    try {
      vocab_parallel_cross_entropy(losses.data(), shard.data(), shard.data(), targets.data(), kN,
                                   v_l, v_start, kV, 1.f, s.view(), &tp);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos)
        << "target " << bad << " should throw mt::Error naming it; got '" << msg << "'";
  }
  tp.barrier();  // every rank threw before any collective: they are still in step
}

}  // namespace vocab_parallel_cross_entropy_test
}  // namespace mt
