// adamw's CUDA twin against its CPU code: the same float scalars and the same
// float operations per element in the same order (either side may fuse a
// multiply-add), so param, m and v agree to rel_max_err (max abs error over
// max |CPU value|) <= 1e-6 after several chained steps; param_bf16 is exactly
// the bf16 of the GPU's own new param, and within 1e-2 of the CPU's copy (a
// float an ulp off may round to the neighbouring bf16).
#include <cmath>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace adamw_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::widen_bf16;

struct Case {
  int64_t n;
  AdamWHyper h;
  int64_t step0;  // first step of the chain
  bool with_bf16;
};

AdamWHyper hyper(float lr, float b1, float b2, float wd, float gscale) {
  AdamWHyper h;
  h.lr = lr;
  h.beta1 = b1;
  h.beta2 = b2;
  h.weight_decay = wd;
  h.grad_scale = gscale;
  return h;
}

const Case kCases[] = {
    {1, hyper(1e-3f, 0.9f, 0.999f, 0.f, 1.f), 1, false},
    {257, hyper(3e-4f, 0.9f, 0.95f, 0.1f, 1.f), 1, true},
    {100003, hyper(1e-2f, 0.9f, 0.999f, 0.01f, 0.37f), 1, true},
    {1025, hyper(1e-3f, 0.4f, 0.99f, 0.1f, 1.f), 7, false},  // beta1 < 0.5: lerp's other form
    {4099, hyper(6e-4f, 0.9f, 0.95f, 0.1f, 2.5f), 1000, true},
};

TEST(AdamWCuda, ChainedStepsMatchTheCpu) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    const std::string what = "n=" + std::to_string(c.n) + " step0=" + std::to_string(c.step0) +
                             " beta1=" + std::to_string(c.h.beta1);
    auto p = test::randn(c.n, "adamw.cuda.p");
    auto m = test::randn(c.n, "adamw.cuda.m", 0.1f);
    auto v = test::randn(c.n, "adamw.cuda.v", 0.01f);
    for (float& e : v) e = std::fabs(e);
    std::vector<uint16_t> pb(size_t(c.n), 0);
    OnGpu<float> gp(p), gm(m), gv(v);
    OnGpu<uint16_t> gpb(std::vector<uint16_t>(size_t(c.n), 0x7FC0));  // NaN: all written
    for (int64_t k = 0; k < 4; ++k) {
      const auto g = test::randn(c.n, "adamw.cuda.g" + std::to_string(k), 0.3f);
      OnGpu<float> gg(g);
      const int64_t step = c.step0 + k;
      adamw_step(p.data(), g.data(), m.data(), v.data(), c.n, c.h, step,
                 c.with_bf16 ? pb.data() : nullptr);
      adamw_step(gp.get(), gg.get(), gm.get(), gv.get(), c.n, c.h, step,
                 c.with_bf16 ? gpb.get() : nullptr);
      EXPECT_LE(rel_max_err(gp.host(), p), 1e-6) << "param, " << what << " step " << step;
      EXPECT_LE(rel_max_err(gm.host(), m), 1e-6) << "m, " << what << " step " << step;
      EXPECT_LE(rel_max_err(gv.host(), v), 1e-6) << "v, " << what << " step " << step;
      if (c.with_bf16) {
        const auto got_b = gpb.host();
        const auto got_p = gp.host();
        for (size_t i = 0; i < got_b.size(); ++i)
          ASSERT_EQ(got_b[i], bf16_from_f32(got_p[i])) << what << " element " << i;
        EXPECT_LE(rel_max_err(widen_bf16(got_b), widen_bf16(pb)), 1e-2) << what;
      }
    }
  }
}

}  // namespace adamw_cuda_test
}  // namespace mt
