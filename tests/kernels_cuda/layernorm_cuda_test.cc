// layernorm's CUDA twin against its CPU code, for every storage mix of input,
// weight, bias and output. Tolerances (rel_max_err: max abs error over max
// |CPU value|): fp32 outputs and statistics 1e-5 (the row sums are added in
// another order), bf16-stored outputs 1e-2 (a float an ulp off can round to
// the neighbouring bf16, 2^-8 relative), dweight / dbias 1e-4 (sums over up to
// 20001 rows, in another order).
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace layernorm_cuda_test {

using test::OnGpu;
using test::rel_max_err;
using test::Stored;
using test::widen_bf16;


struct Shape {
  int64_t n, c;
};
// Odd rows and columns, c past one block's threads (8193: 512 threads), and
// many rows (several chunks of the parameter-gradient pass, 80 rows each).
const Shape kShapes[] = {{1, 1}, {37, 768}, {37, 100}, {3, 8193}, {20001, 48}};

// Storage of input, weight, bias, output: bf16 when set.
struct Mix {
  bool inp, weight, bias, out;
};
const Mix kMixes[] = {{false, false, false, false},
                      {true, true, true, true},
                      {true, false, true, false},
                      {false, true, false, true}};

std::string name(const Shape& sh, const Mix& m) {
  return "n=" + std::to_string(sh.n) + " c=" + std::to_string(sh.c) + " bf16 inp/w/b/out=" +
         std::to_string(m.inp) + std::to_string(m.weight) + std::to_string(m.bias) +
         std::to_string(m.out);
}

TEST(LayernormCuda, ForwardAndBackward) {
  MT_REQUIRE_GPU();
  for (const Shape& sh : kShapes) {
    for (const Mix& m : kMixes) {
      SCOPED_TRACE(name(sh, m));
      const int64_t n = sh.n, c = sh.c, nc = n * c;
      Stored x(test::randn(nc, "ln.cuda.x", 2.f, 0.5f), m.inp);
      Stored w(test::randn(c, "ln.cuda.w", 0.5f, 1.f), m.weight);
      Stored b(test::randn(c, "ln.cuda.b", 0.5f), m.bias);
      Stored out(std::vector<float>(size_t(nc), NAN), m.out);  // poison: every element written
      std::vector<float> mean(static_cast<size_t>(n)), rstd(static_cast<size_t>(n));
      const std::vector<float> nan_n(static_cast<size_t>(n), NAN);
      OnGpu<float> gmean(nan_n), grstd(nan_n);
      layernorm_forward(out.cpu(), mean.data(), rstd.data(), x.cpu(), w.cpu(), b.cpu(), n, c,
                        1e-5f);
      layernorm_forward(out.gpu(), gmean.get(), grstd.get(), x.gpu(), w.gpu(), b.gpu(), n, c,
                        1e-5f);
      EXPECT_LE(rel_max_err(out.gpu_values(), out.cpu_values()), out.tol()) << "out";
      EXPECT_LE(rel_max_err(gmean.host(), mean), 1e-5) << "mean";
      EXPECT_LE(rel_max_err(grstd.host(), rstd), 1e-5) << "rstd";

      // Backward from the CPU's statistics; every gradient += onto random values.
      const auto dout = test::randn(nc, "ln.cuda.dout");
      auto dinp = test::randn(nc, "ln.cuda.dinp0");
      auto dw = test::randn(c, "ln.cuda.dw0"), db = test::randn(c, "ln.cuda.db0");
      OnGpu<float> gdout(dout), gdinp(dinp), gdw(dw), gdb(db), gmean2(mean), grstd2(rstd);
      layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.cpu(), w.cpu(),
                         mean.data(), rstd.data(), n, c);
      layernorm_backward(gdinp.get(), gdw.get(), gdb.get(), gdout.get(), x.gpu(), w.gpu(),
                         gmean2.get(), grstd2.get(), n, c);
      // dinp is rstd times a difference of O(1) terms: their round-off grows
      // with rstd (316 = 1/sqrt(eps) for c = 1, where x - mean is exactly 0).
      float max_rstd = 0.f;
      for (float r : rstd) max_rstd = std::max(max_rstd, r);
      EXPECT_LE(rel_max_err(gdinp.host(), dinp), 1e-5 * std::max(1.0, max_rstd / 100.0)) << "dinp";
      EXPECT_LE(rel_max_err(gdw.host(), dw), 1e-4) << "dweight";
      EXPECT_LE(rel_max_err(gdb.host(), db), 1e-4) << "dbias";
    }
  }
}

// The parameter gradients are deterministic: the same call twice gives the same bits.
TEST(LayernormCuda, BackwardIsDeterministic) {
  MT_REQUIRE_GPU();
  const int64_t n = 4097, c = 200;
  OnGpu<float> x(test::randn(n * c, "ln.cuda.det.x")), w(test::randn(c, "ln.cuda.det.w"));
  OnGpu<float> dout(test::randn(n * c, "ln.cuda.det.dout"));
  OnGpu<float> mean(test::randn(n, "ln.cuda.det.m", 0.1f));
  OnGpu<float> rstd(test::randn(n, "ln.cuda.det.r", 0.1f, 1.f));
  std::vector<float> first_w, first_b;
  for (int rep = 0; rep < 2; ++rep) {
    OnGpu<float> dinp(n * c), dw(c), db(c);
    layernorm_backward(dinp.get(), dw.get(), db.get(), dout.get(), x.get(), w.get(), mean.get(),
                       rstd.get(), n, c);
    if (rep == 0) {
      first_w = dw.host();
      first_b = db.host();
    } else {
      EXPECT_EQ(dw.host(), first_w);
      EXPECT_EQ(db.host(), first_b);
    }
  }
}

}  // namespace layernorm_cuda_test
}  // namespace mt
