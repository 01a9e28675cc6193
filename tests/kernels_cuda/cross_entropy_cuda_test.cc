// cross_entropy's CUDA twin against its CPU code: the fused rows (fp32
// gradient in place and bf16 gradient), the three phases of a vocabulary shard,
// softmax_cross_entropy, and check_targets' error on the GPU. Tolerances
// (rel_max_err: max abs error over max |CPU value|): losses, sums of
// exponentials, kept exponentials and fp32 gradients 1e-5 (CUDA's expf and the
// CPU's exp_f32 differ by a few ulp; the sums are in double on both), bf16
// gradients 1e-2 (a float an ulp off can round to the neighbouring bf16).
// On the GPU the fused rows and the phases give the same bits, as on the CPU.
#include "kernels/cross_entropy.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace cross_entropy_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::widen_bf16;

struct Shape {
  int64_t n, v;
};
const Shape kShapes[] = {{37, 1000}, {37, 37}, {5, 4099}, {37, 50304}, {1, 1}};

// Logits (n, v), rows at different offsets (row 2 far above exp's range if unshifted).
std::vector<float> make_logits(const Shape& s, const char* key) {
  auto z = test::randn(s.n * s.v, key, 3.f);
  if (s.n > 2)
    for (int64_t j = 0; j < s.v; ++j) z[size_t(2 * s.v + j)] += 1000.f;
  return z;
}

// Targets in [0, v) with the first and last columns among them.
std::vector<int32_t> make_targets(const Shape& s) {
  std::vector<int32_t> t(static_cast<size_t>(s.n));
  for (int64_t i = 0; i < s.n; ++i) t[size_t(i)] = int32_t((i * 7919 + 3) % s.v);
  t[0] = 0;
  t[size_t(s.n - 1)] = int32_t(s.v - 1);
  return t;
}

std::string name(const Shape& s) {
  return "n=" + std::to_string(s.n) + " v=" + std::to_string(s.v);
}

TEST(CrossEntropyCuda, RowsMatchCpu) {
  MT_REQUIRE_GPU();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(name(s));
    const auto z = make_logits(s, "ce.cuda.z");
    const auto t = make_targets(s);
    OnGpu<int32_t> gt(t);
    const size_t nv = size_t(s.n * s.v), n = size_t(s.n);
    for (float scale : {0.f, 0.5f}) {
      SCOPED_TRACE("grad_scale=" + std::to_string(scale));
      // fp32 gradient in place of the logits.
      auto zc = z;
      std::vector<float> loss(n);
      cross_entropy_rows(loss.data(), zc.data(), zc.data(), t.data(), s.n, s.v, scale);
      OnGpu<float> gz(z), gloss(std::vector<float>(n, NAN));
      cross_entropy_rows(gloss.get(), gz.get(), gz.get(), gt.get(), s.n, s.v, scale);
      EXPECT_LE(rel_max_err(gloss.host(), loss), 1e-5) << "losses";
      if (scale == 0.f)
        EXPECT_EQ(gz.host(), z) << "grad_scale == 0 must leave the logits unchanged";
      else
        EXPECT_LE(rel_max_err(gz.host(), zc), 1e-5) << "fp32 gradient";
      if (scale == 0.f) continue;
      // bf16 gradient; the logits are left holding the exponentials.
      auto ze = z;
      std::vector<uint16_t> g(nv);
      cross_entropy_rows(loss.data(), ze.data(), g.data(), t.data(), s.n, s.v, scale);
      OnGpu<float> gze(z), gloss2(std::vector<float>(n, NAN));
      OnGpu<uint16_t> gg(std::vector<uint16_t>(nv, 0x7FC0));  // NaN: every element written
      cross_entropy_rows(gloss2.get(), gze.get(), gg.get(), gt.get(), s.n, s.v, scale);
      EXPECT_LE(rel_max_err(gloss2.host(), loss), 1e-5) << "losses (bf16 gradient)";
      EXPECT_LE(rel_max_err(widen_bf16(gg.host()), widen_bf16(g)), 1e-2) << "bf16 gradient";
      EXPECT_LE(rel_max_err(gze.host(), ze), 1e-5) << "kept exponentials";
    }
  }
}

// One shard's phases (the all-reduces between them left out): columns
// [v_start, v_start + v_local) of a v-column vocabulary; targets outside the
// shard give target_logit 0 and no one-hot term.
TEST(CrossEntropyCuda, ShardPhasesMatchCpu) {
  MT_REQUIRE_GPU();
  const int64_t n = 37, v = 1000;
  const Shape full{n, v};
  const auto t = make_targets(full);
  OnGpu<int32_t> gt(t);
  const int64_t starts[] = {0, 400}, widths[] = {400, 600};
  for (int shard = 0; shard < 2; ++shard) {
    const int64_t v_start = starts[shard], v_local = widths[shard];
    SCOPED_TRACE("shard [" + std::to_string(v_start) + ", " +
                 std::to_string(v_start + v_local) + ")");
    const auto z = make_logits({n, v_local}, shard == 0 ? "ce.cuda.s0" : "ce.cuda.s1");
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(bf16 ? "bf16 gradient" : "fp32 gradient in place");
      auto zc = z;
      std::vector<float> mx(n), loss(n);
      std::vector<double> sum(n), target(n);
      std::vector<uint16_t> g(size_t(n * v_local));
      cross_entropy_shard_max(mx.data(), zc.data(), n, v_local);
      cross_entropy_shard_sums(sum.data(), target.data(), zc.data(), mx.data(), t.data(), n,
                               v_local, v_start, true);
      const auto exps = zc;
      const WriteView gc = bf16 ? WriteView(g.data()) : WriteView(zc.data());
      cross_entropy_shard_finish(loss.data(), gc, zc.data(), sum.data(), target.data(), t.data(),
                                 n, v_local, v_start, 0.25f);

      OnGpu<float> gz(z), gmx(std::vector<float>(n, NAN)), gloss(std::vector<float>(n, NAN));
      OnGpu<double> gsum(std::vector<double>(n, NAN)), gtarget(std::vector<double>(n, NAN));
      OnGpu<uint16_t> gg(std::vector<uint16_t>(size_t(n * v_local), 0x7FC0));
      cross_entropy_shard_max(gmx.get(), gz.get(), n, v_local);
      EXPECT_EQ(gmx.host(), mx) << "row max";
      cross_entropy_shard_sums(gsum.get(), gtarget.get(), gz.get(), gmx.get(), gt.get(), n,
                               v_local, v_start, true);
      EXPECT_LE(rel_max_err(gsum.host(), sum), 1e-6) << "sum_exp";
      EXPECT_LE(rel_max_err(gtarget.host(), target), 1e-6) << "target_logit";
      EXPECT_LE(rel_max_err(gz.host(), exps), 1e-5) << "kept exponentials";
      const WriteView gg_view = bf16 ? WriteView(gg.get()) : WriteView(gz.get());
      cross_entropy_shard_finish(gloss.get(), gg_view, gz.get(), gsum.get(), gtarget.get(),
                                 gt.get(), n, v_local, v_start, 0.25f);
      EXPECT_LE(rel_max_err(gloss.host(), loss), 1e-5) << "losses";
      if (bf16)
        EXPECT_LE(rel_max_err(widen_bf16(gg.host()), widen_bf16(g)), 1e-2) << "bf16 gradient";
      else
        EXPECT_LE(rel_max_err(gz.host(), zc), 1e-5) << "fp32 gradient";
    }
  }
}

// cross_entropy_rows and the three phases give the same bits on the GPU.
TEST(CrossEntropyCuda, FusedRowsEqualThePhases) {
  MT_REQUIRE_GPU();
  for (const Shape& s : {Shape{5, 1300}, Shape{3, 50304}}) {
    SCOPED_TRACE(name(s));
    const auto z = make_logits(s, "ce.cuda.f");
    const auto t = make_targets(s);
    OnGpu<int32_t> gt(t);
    OnGpu<float> fused(z), phased(z), lf(s.n), lp(s.n), mx(s.n);
    OnGpu<double> sum(s.n), target(s.n);
    cross_entropy_rows(lf.get(), fused.get(), fused.get(), gt.get(), s.n, s.v, 0.5f);
    cross_entropy_shard_max(mx.get(), phased.get(), s.n, s.v);
    cross_entropy_shard_sums(sum.get(), target.get(), phased.get(), mx.get(), gt.get(), s.n, s.v,
                             0, true);
    cross_entropy_shard_finish(lp.get(), phased.get(), phased.get(), sum.get(), target.get(),
                               gt.get(), s.n, s.v, 0, 0.5f);
    EXPECT_EQ(lf.host(), lp.host());
    EXPECT_EQ(fused.host(), phased.host());
  }
}

TEST(CrossEntropyCuda, SoftmaxCrossEntropyMatchesCpu) {
  MT_REQUIRE_GPU();
  const Shape s{37, 1000};
  const auto z = make_logits(s, "ce.cuda.sce");
  const auto t = make_targets(s);
  auto zc = z;
  std::vector<float> loss(size_t(s.n));
  softmax_cross_entropy(loss.data(), zc.data(), t.data(), s.n, s.v, 1.f / 37);
  OnGpu<int32_t> gt(t);
  OnGpu<float> gz(z), gloss(std::vector<float>(size_t(s.n), NAN));
  softmax_cross_entropy(gloss.get(), gz.get(), gt.get(), s.n, s.v, 1.f / 37);
  EXPECT_LE(rel_max_err(gloss.host(), loss), 1e-5) << "losses";
  EXPECT_LE(rel_max_err(gz.host(), zc), 1e-5) << "gradient";
}

// The GPU's check names the first bad row as the CPU does; softmax_cross_entropy
// checks before it touches the logits.
TEST(CrossEntropyCuda, OutOfRangeTargetIsTheCpusError) {
  MT_REQUIRE_GPU();
  const int64_t n = 300, v = 10;
  for (int32_t bad : {10, -1}) {
    std::vector<int32_t> t(size_t(n), 3);
    t[201] = bad;
    t[250] = 11;  // a later bad row is not the one named
    OnGpu<int32_t> gt(t);
    try {
      check_targets(gt.get(), n, v);
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("target id " + std::to_string(bad) + " at row 201 is outside [0, 10)"),
                std::string::npos)
          << msg;
    }
    const std::vector<float> z(size_t(n * v), 0.5f);
    OnGpu<float> gz(z), gloss(n);
    EXPECT_THROW(softmax_cross_entropy(gloss.get(), gz.get(), gt.get(), n, v, 1.f), Error);
    EXPECT_EQ(gz.host(), z) << "logits modified before the check";
  }
  OnGpu<int32_t> good(std::vector<int32_t>(size_t(n), 9));
  EXPECT_NO_THROW(check_targets(good.get(), n, v));
}

}  // namespace cross_entropy_cuda_test
}  // namespace mt
