// rmsnorm's CUDA twin against its CPU code, for every storage mix of input,
// weight and output. Tolerances (rel_max_err: max abs error over max |CPU
// value|): fp32 outputs and rstd 1e-5 (the row sums are added in another
// order), bf16-stored outputs 1e-2 (a float an ulp off can round to the
// neighbouring bf16, 2^-8 relative), dweight 1e-4 (sums over up to 20001
// rows, in another order).
#include "kernels/rmsnorm.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace rmsnorm_cuda_test {

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

// Storage of input, weight, output: bf16 when set.
struct Mix {
  bool inp, weight, out;
};
const Mix kMixes[] = {{false, false, false}, {true, true, true}, {true, false, false},
                      {false, true, true}};

std::string name(const Shape& sh, const Mix& m) {
  return "n=" + std::to_string(sh.n) + " c=" + std::to_string(sh.c) + " bf16 inp/w/out=" +
         std::to_string(m.inp) + std::to_string(m.weight) + std::to_string(m.out);
}

TEST(RmsnormCuda, ForwardAndBackward) {
  MT_REQUIRE_GPU();
  for (const Shape& sh : kShapes) {
    for (const Mix& m : kMixes) {
      SCOPED_TRACE(name(sh, m));
      const int64_t n = sh.n, c = sh.c, nc = n * c;
      Stored x(test::randn(nc, "rms.cuda.x", 2.f, 0.5f), m.inp);
      Stored w(test::randn(c, "rms.cuda.w", 0.5f, 1.f), m.weight);
      Stored out(std::vector<float>(size_t(nc), NAN), m.out);  // poison: every element written
      std::vector<float> rstd(static_cast<size_t>(n));
      OnGpu<float> grstd(std::vector<float>(size_t(n), NAN));
      rmsnorm_forward(out.cpu(), rstd.data(), x.cpu(), w.cpu(), n, c, 1e-5f);
      rmsnorm_forward(out.gpu(), grstd.get(), x.gpu(), w.gpu(), n, c, 1e-5f);
      EXPECT_LE(rel_max_err(out.gpu_values(), out.cpu_values()), out.tol()) << "out";
      EXPECT_LE(rel_max_err(grstd.host(), rstd), 1e-5) << "rstd";

      // Backward from the CPU's rstd; every gradient += onto random values.
      const auto dout = test::randn(nc, "rms.cuda.dout");
      auto dinp = test::randn(nc, "rms.cuda.dinp0");
      auto dw = test::randn(c, "rms.cuda.dw0");
      OnGpu<float> gdout(dout), gdinp(dinp), gdw(dw), grstd2(rstd);
      rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.cpu(), w.cpu(), rstd.data(), n, c);
      rmsnorm_backward(gdinp.get(), gdw.get(), gdout.get(), x.gpu(), w.gpu(), grstd2.get(), n, c);
      EXPECT_LE(rel_max_err(gdinp.host(), dinp), 1e-5) << "dinp";
      EXPECT_LE(rel_max_err(gdw.host(), dw), 1e-4) << "dweight";
    }
  }
}

// The weight gradient is deterministic: the same call twice gives the same bits.
TEST(RmsnormCuda, BackwardIsDeterministic) {
  MT_REQUIRE_GPU();
  const int64_t n = 4097, c = 200;
  OnGpu<float> x(test::randn(n * c, "rms.cuda.det.x")), w(test::randn(c, "rms.cuda.det.w"));
  OnGpu<float> dout(test::randn(n * c, "rms.cuda.det.dout"));
  OnGpu<float> rstd(test::randn(n, "rms.cuda.det.r", 0.1f, 1.f));
  std::vector<float> first;
  for (int rep = 0; rep < 2; ++rep) {
    OnGpu<float> dinp(n * c), dw(c);
    rmsnorm_backward(dinp.get(), dw.get(), dout.get(), x.get(), w.get(), rstd.get(), n, c);
    if (rep == 0)
      first = dw.host();
    else
      EXPECT_EQ(dw.host(), first);
  }
}

}  // namespace rmsnorm_cuda_test
}  // namespace mt
