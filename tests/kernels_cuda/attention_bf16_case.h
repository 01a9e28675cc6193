// The bf16 attention cases the tensor-core implementations (attention_tc.cu,
// attention_fa.cu) are tested on: q, k, v in fp32 and bf16 storage against the
// CPU entry point, forward (ctx, lse) and backward (dq, dk, dv with the row's
// own D, with and without ctx, and with row_dsum given), every output
// NaN-poisoned first. `prefix` keys the random inputs and the dropout stream.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt::test {

struct Case {
  int64_t b, a, s, d;
  int64_t sk = 0, q_pos0 = 0, k_pos0 = 0, s_global = 0;
  float p = 0.f;
};

inline std::string name_of(const Case& c, bool bf16_storage) {
  return "(b=" + std::to_string(c.b) + ", a=" + std::to_string(c.a) + ", s=" +
         std::to_string(c.s) + ", d=" + std::to_string(c.d) + ", sk=" + std::to_string(c.sk) +
         ", q_pos0=" + std::to_string(c.q_pos0) + ", k_pos0=" + std::to_string(c.k_pos0) +
         ") p=" + std::to_string(c.p) + (bf16_storage ? " bf16 storage" : " fp32 storage");
}

inline AttentionDims dims_of(const Case& c) {
  AttentionDims dm;
  dm.b = c.b;
  dm.a = c.a;
  dm.s = c.s;
  dm.d = c.d;
  dm.math = MathMode::kBF16;
  dm.sk = c.sk;
  dm.q_pos0 = c.q_pos0;
  dm.k_pos0 = c.k_pos0;
  dm.s_global = c.s_global;
  return dm;
}

inline AttentionDropout dropout_of(const Case& c, const std::string& prefix) {
  AttentionDropout drop;
  drop.rng = RngStream::make(11, prefix + "_dropout", /*step=*/5);
  drop.p = c.p;
  drop.sample0 = 2;  // a shard of a larger batch and of more heads
  drop.a_global = c.a + 3;
  drop.head0 = 2;
  return drop;
}

inline std::vector<float> nans(int64_t n) { return std::vector<float>(size_t(n), NAN); }


// -inf at the same rows; the finite ones within tol of max |cpu|.
inline void expect_lse_near(const std::vector<float>& gpu, const std::vector<float>& cpu,
                            double tol, const std::string& what) {
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

template <class T>
ReadView view(const OnGpu<T>& x) {
  return ReadView(static_cast<const T*>(x.get()));
}

// Forward and backward of one case; q, k, v stored as T (float or bf16).
template <class T>
void check_case(const Case& c, const std::string& prefix, const std::vector<T>& q,
                const std::vector<T>& k, const std::vector<T>& v) {
  const std::string what = name_of(c, sizeof(T) == 2);
  const double tol = 2e-2, lse_tol = 1e-3;
  const AttentionDims dm = dims_of(c);
  const AttentionDropout drop = dropout_of(c, prefix);
  const int64_t sk = c.sk > 0 ? c.sk : c.s;
  const int64_t nq = c.b * c.a * c.s * c.d, nk = c.b * c.a * sk * c.d, rows = c.b * c.a * c.s;
  const int64_t nws = attention_workspace_floats(dm);
  std::vector<float> ws(static_cast<size_t>(nws));
  OnGpu<T> gq(q), gk(k), gv(v);
  OnGpu<float> gws(nws);

  std::vector<float> ctx(static_cast<size_t>(nq)), lse(static_cast<size_t>(rows));
  attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), dm, drop, ws.data());
  OnGpu<float> gctx(nans(nq)), glse(nans(rows));
  attention_forward(gctx.get(), glse.get(), view(gq), view(gk), view(gv), dm, drop, gws.get());
  EXPECT_LE(rel_max_err(gctx.host(), ctx), tol) << what << " ctx";
  expect_lse_near(glse.host(), lse, lse_tol, what);

  // Backward from the CPU's ctx and lse (so both sides start from equal inputs).
  const auto dctx = test::randn(nq, prefix + ".cuda.dctx");
  std::vector<float> dsum(static_cast<size_t>(rows));
  attention_row_dsum(dsum.data(), dctx.data(), ctx.data(), rows, c.d);
  OnGpu<float> gdctx(dctx), gctx_cpu(ctx), glse_cpu(lse), gdsum(dsum);
  enum Variant { kOwnDWithCtx, kOwnDNoCtx, kGivenDsum };
  for (Variant var : {kOwnDWithCtx, kOwnDNoCtx, kGivenDsum}) {
    const char* vname = var == kOwnDWithCtx ? " [own D, ctx]"
                        : var == kOwnDNoCtx ? " [own D, no ctx]"
                                            : " [row_dsum]";
    const bool with_ctx = var != kOwnDNoCtx;
    const float* dsum_cpu = var == kGivenDsum ? dsum.data() : nullptr;
    const float* dsum_gpu = var == kGivenDsum ? gdsum.get() : nullptr;
    std::vector<float> dq(static_cast<size_t>(nq)), dk(static_cast<size_t>(nk)),
        dv(static_cast<size_t>(nk));
    attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), q.data(), k.data(),
                       v.data(), with_ctx ? ctx.data() : nullptr, lse.data(), dm, drop,
                       ws.data(), dsum_cpu);
    OnGpu<float> gdq(nans(nq)), gdk(nans(nk)), gdv(nans(nk));
    attention_backward(gdq.get(), gdk.get(), gdv.get(), gdctx.get(), view(gq), view(gk),
                       view(gv), with_ctx ? gctx_cpu.get() : nullptr, glse_cpu.get(), dm, drop,
                       gws.get(), dsum_gpu);
    EXPECT_LE(rel_max_err(gdq.host(), dq), tol) << what << vname << " dq";
    EXPECT_LE(rel_max_err(gdk.host(), dk), tol) << what << vname << " dk";
    EXPECT_LE(rel_max_err(gdv.host(), dv), tol) << what << vname << " dv";
  }
}

// One case in fp32 and in bf16 storage.
inline void check_both_storages(const Case& c, const std::string& prefix) {
  const int64_t sk = c.sk > 0 ? c.sk : c.s;
  const auto q = test::randn(c.b * c.a * c.s * c.d, prefix + ".cuda.q", 1.5f);
  const auto k = test::randn(c.b * c.a * sk * c.d, prefix + ".cuda.k");
  const auto v = test::randn(c.b * c.a * sk * c.d, prefix + ".cuda.v");
  check_case(c, prefix, q, k, v);
  check_case(c, prefix, to_bf16(q), to_bf16(k), to_bf16(v));
}

}  // namespace mt::test
