// attention's CUDA twin against its CPU code, same random inputs:
//  - forward ctx (rel_max_err) and lse (-inf at the same rows, the finite ones
//    to the same relative error against max |lse|);
//  - backward dq, dk, dv given ctx (fp32: D = dctx·ctx; bf16/fp16: the row's
//    own D from P·dP), given row_dsum, and (bf16/fp16) with ctx null;
//  - attention_merge and attention_row_dsum.
// Every output is `=` and NaN-poisoned on the GPU first (every element must
// be written). Tolerances: fp32 1e-4 (the GPU sums rows in another order and
// rescales online), bf16/fp16 math 2e-2 (the GPU rounds the unnormalised
// probabilities to bf16, the CPU the normalised ones). Dropout (p = 0.1)
// masks must be the CPU's bit for bit: a dropped element the CPU keeps moves
// ctx by far more than these tolerances.
#include "kernels/attention.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace attention_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::to_bf16;

struct Case {
  int64_t b, a, s, d;
  int64_t sk = 0, q_pos0 = 0, k_pos0 = 0, s_global = 0;
  float p = 0.f;
  int64_t sample0 = 3;
  int64_t dv = 0;  // v's and ctx's head dim (0: d)
  int64_t dv_or_d() const { return dv > 0 ? dv : d; }
};

std::string name_of(const Case& c, MathMode math, bool bf16_storage) {
  return "(b=" + std::to_string(c.b) + ", a=" + std::to_string(c.a) + ", s=" +
         std::to_string(c.s) + ", d=" + std::to_string(c.d) + ", dv=" + std::to_string(c.dv_or_d()) +
         ", sk=" + std::to_string(c.sk) +
         ", q_pos0=" + std::to_string(c.q_pos0) + ", k_pos0=" + std::to_string(c.k_pos0) +
         ") p=" + std::to_string(c.p) + " " + math_mode_name(math) +
         (bf16_storage ? " bf16 storage" : "");
}

AttentionDims dims_of(const Case& c, MathMode math) {
  AttentionDims dm;
  dm.b = c.b;
  dm.a = c.a;
  dm.s = c.s;
  dm.d = c.d;
  dm.dv = c.dv;
  dm.math = math;
  dm.sk = c.sk;
  dm.q_pos0 = c.q_pos0;
  dm.k_pos0 = c.k_pos0;
  dm.s_global = c.s_global;
  return dm;
}

AttentionDropout dropout_of(const Case& c) {
  AttentionDropout drop;
  drop.rng = RngStream::make(7, "attention_dropout", /*step=*/3);
  drop.p = c.p;
  drop.sample0 = c.sample0;  // a shard of a larger batch and of more heads
  drop.a_global = c.a + 2;
  drop.head0 = 1;
  return drop;
}

std::vector<float> nans(int64_t n) { return std::vector<float>(size_t(n), NAN); }


// -inf at the same rows; the finite ones within tol of max |cpu|.
void expect_lse_near(const std::vector<float>& gpu, const std::vector<float>& cpu, double tol,
                     const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  double ref = 1e-30, err = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isinf(cpu[i])) {
      EXPECT_EQ(gpu[i], cpu[i]) << what << " lse[" << i << "]";
      continue;
    }
    ASSERT_TRUE(std::isfinite(gpu[i])) << what << " lse[" << i << "] = " << gpu[i];
    ref = std::max(ref, std::fabs(double(cpu[i])));
    err = std::max(err, std::fabs(double(gpu[i]) - double(cpu[i])));
  }
  EXPECT_LE(err / ref, tol) << what << " lse";
}

// Forward and backward of one case; q, k, v stored as T (float or bf16).
template <class T>
void check_case(const Case& c, MathMode math, const std::vector<T>& q, const std::vector<T>& k,
                const std::vector<T>& v) {
  const bool bf16_storage = sizeof(T) == 2;
  const std::string what = name_of(c, math, bf16_storage);
  const double tol = math == MathMode::kF32 ? 1e-4 : 2e-2;
  const AttentionDims dm = dims_of(c, math);
  const AttentionDropout drop = dropout_of(c);
  const int64_t sk = c.sk > 0 ? c.sk : c.s;
  const int64_t nq = c.b * c.a * c.s * c.d, nk = c.b * c.a * sk * c.d, rows = c.b * c.a * c.s;
  const int64_t nc = rows * c.dv_or_d(), nv = c.b * c.a * sk * c.dv_or_d();  // ctx's, v's
  const int64_t nws = attention_workspace_floats(dm);
  std::vector<float> ws(static_cast<size_t>(nws));
  OnGpu<T> gq(q), gk(k), gv(v);
  OnGpu<float> gws(nws);

  // Forward.
  std::vector<float> ctx(static_cast<size_t>(nc)), lse(static_cast<size_t>(rows));
  attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, drop, ws.data());
  OnGpu<float> gctx(nans(nc)), glse(nans(rows));
  attention_forward(gctx.get(), glse.get(), gq.get(), gk.get(), gv.get(), dm, drop, gws.get());
  EXPECT_LE(rel_max_err(gctx.host(), ctx), tol) << what << " ctx";
  expect_lse_near(glse.host(), lse, tol, what);

  // Backward from the CPU's ctx and lse (so it is compared on equal inputs).
  const auto dctx = test::randn(nc, "attention.cuda.dctx");
  std::vector<float> dsum(static_cast<size_t>(rows));
  attention_row_dsum(dsum.data(), dctx.data(), ctx.data(), rows, c.dv_or_d());
  OnGpu<float> gdctx(dctx), gctx_cpu(ctx), glse_cpu(lse), gdsum(dsum);
  enum Variant { kGivenCtx, kGivenDsum, kNoCtx };
  for (Variant var : {kGivenCtx, kGivenDsum, kNoCtx}) {
    if (var == kNoCtx && math == MathMode::kF32) continue;  // fp32 needs ctx or row_dsum
    const char* vname = var == kGivenCtx ? " [ctx]" : var == kGivenDsum ? " [row_dsum]" : " [own D]";
    const float* ctx_cpu = var == kNoCtx ? nullptr : ctx.data();
    const float* ctx_gpu = var == kNoCtx ? nullptr : gctx_cpu.get();
    const float* dsum_cpu = var == kGivenDsum ? dsum.data() : nullptr;
    const float* dsum_gpu = var == kGivenDsum ? gdsum.get() : nullptr;
    std::vector<float> dq(static_cast<size_t>(nq)), dk(static_cast<size_t>(nk)), dv(static_cast<size_t>(nv));
    attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.data(), k.data(),
                       v.data(), ctx_cpu, lse.data(), dm, drop, ws.data(), dsum_cpu);
    OnGpu<float> gdq(nans(nq)), gdk(nans(nk)), gdv(nans(nv));
    attention_backward(gdq.get(), gdk.get(), gdv.get(), gdctx.get(), gq.get(), gk.get(),
                       gv.get(), ctx_gpu, glse_cpu.get(), dm, drop, gws.get(), dsum_gpu);
    EXPECT_LE(rel_max_err(gdq.host(), dq), tol) << what << vname << " dq";
    EXPECT_LE(rel_max_err(gdk.host(), dk), tol) << what << vname << " dk";
    EXPECT_LE(rel_max_err(gdv.host(), dv), tol) << what << vname << " dv";
  }
}

// Every case in fp32; in bf16 math with fp32 and with bf16 storage.
void check_all(const Case& c, bool fp16 = false) {
  const int64_t sk = c.sk > 0 ? c.sk : c.s;
  const auto q = test::randn(c.b * c.a * c.s * c.d, "attention.cuda.q");
  const auto k = test::randn(c.b * c.a * sk * c.d, "attention.cuda.k");
  const auto v = test::randn(c.b * c.a * sk * c.dv_or_d(), "attention.cuda.v");
  check_case(c, MathMode::kF32, q, k, v);
  check_case(c, MathMode::kBF16, q, k, v);
  check_case(c, MathMode::kBF16, to_bf16(q), to_bf16(k), to_bf16(v));
  if (fp16) check_case(c, MathMode::kF16, q, k, v);
}

TEST(AttentionCuda, SmallOddShape) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  check_all({2, 3, 37, 16}, /*fp16=*/true);
  check_all({2, 3, 37, 16, 0, 0, 0, 0, 0.1f}, /*fp16=*/true);
}

TEST(AttentionCuda, HeadDims) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  for (int64_t d : {8, 32, 40, 64, 80, 96, 128}) check_all({1, 2, 70, d, 0, 0, 0, 0, 0.1f});
}

TEST(AttentionCuda, LongerRows) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  check_all({1, 2, 128, 64});
  check_all({2, 2, 200, 64});
  check_all({2, 2, 200, 64, 0, 0, 0, 0, 0.1f});
  check_all({1, 1, 300, 128, 0, 0, 0, 0, 0.1f});
}

TEST(AttentionCuda, BlocksOfALongerSequence) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  // Queries after all the keys: every key visible, no mask.
  check_all({1, 2, 48, 32, 40, 64, 0, 128, 0.1f});
  // Diagonal block with sk != s, offsets not multiples of the tiles.
  check_all({2, 2, 50, 64, 70, 30, 20, 100, 0.1f});
  // Keys later than the first queries: rows 0..19 see nothing (lse -inf, ctx 0).
  check_all({1, 2, 48, 16, 48, 0, 20, 96, 0.1f});
  // Every key after every query: all rows -inf, every gradient 0.
  check_all({1, 1, 20, 16, 20, 0, 40, 60});
}

// v and ctx heads of dv != d (multi-latent attention: dqk + dpe = 96 against
// v_head_dim = 64), narrower and wider, one and several column chunks.
Case with_dv(Case c, int64_t dv) {
  c.dv = dv;
  return c;
}

TEST(AttentionCuda, NarrowerValues) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  check_all(with_dv({2, 3, 37, 16}, 8), /*fp16=*/true);
  check_all(with_dv({1, 2, 70, 96, 0, 0, 0, 0, 0.1f}, 64));
  check_all(with_dv({1, 2, 70, 40, 0, 0, 0, 0, 0.1f}, 72));
  check_all(with_dv({2, 2, 50, 64, 70, 30, 20, 100, 0.1f}, 32));  // a block of a longer row
}

// The tensor-core and flash kernels take one head size: with dv != d they
// leave the call to the generic kernels, which give the CPU's results.
TEST(AttentionCuda, NarrowerValuesFallBackFromTheTensorCoreKernels) {
  MT_REQUIRE_GPU();
  for (const auto impl : {cuda::AttentionImpl::kFa, cuda::AttentionImpl::kTc}) {
    const test::UseAttention use(impl);
    check_all(with_dv({1, 2, 70, 64, 0, 0, 0, 0, 0.1f}, 32));
  }
}

TEST(AttentionCuda, DropoutAcrossA32BitBlockCounterCarry) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  // sample0 puts the global indices around 2^34, where the Philox block
  // counter (index / 4) carries into its high word.
  const int64_t per_sample = 5 * 25 * 25;  // a_global * s * s
  check_all({2, 3, 25, 16, 0, 0, 0, 0, 0.2f, (int64_t(1) << 34) / per_sample});
}

TEST(AttentionCuda, MergeAndRowDsum) {
  MT_REQUIRE_GPU();
  const test::UseAttention use(cuda::AttentionImpl::kSimt);  // this file's kernels
  const int64_t rows = 77, d = 40;
  auto ctx = test::randn(rows * d, "attention.cuda.merge.ctx");
  auto lse = test::randn(rows, "attention.cuda.merge.lse", 2.f);
  const auto ctx_b = test::randn(rows * d, "attention.cuda.merge.ctx_b");
  auto lse_b = test::randn(rows, "attention.cuda.merge.lse_b", 2.f);
  for (int64_t r = 0; r < rows; r += 5) lse[size_t(r)] = -INFINITY;       // running has nothing
  for (int64_t r = 0; r < rows; r += 7) lse_b[size_t(r)] = -INFINITY;     // block adds nothing
  OnGpu<float> gctx(ctx), glse(lse), gctx_b(ctx_b), glse_b(lse_b);
  attention_merge(ctx.data(), lse.data(), ctx_b.data(), lse_b.data(), rows, d);
  attention_merge(gctx.get(), glse.get(), gctx_b.get(), glse_b.get(), rows, d);
  EXPECT_LE(rel_max_err(gctx.host(), ctx), 1e-5) << "merged ctx";
  expect_lse_near(glse.host(), lse, 1e-5, "merge");

  const auto dctx = test::randn(rows * d, "attention.cuda.dsum.dctx");
  std::vector<float> dsum(static_cast<size_t>(rows));
  OnGpu<float> gdctx(dctx), gctx_cpu(ctx), gdsum(nans(rows));
  attention_row_dsum(dsum.data(), dctx.data(), ctx.data(), rows, d);
  attention_row_dsum(gdsum.get(), gdctx.get(), gctx_cpu.get(), rows, d);
  EXPECT_LE(rel_max_err(gdsum.host(), dsum), 1e-4) << "row_dsum";
}

}  // namespace attention_cuda_test
}  // namespace mt
