// rope's CUDA twin against its CPU code: the same float products and sums per
// element (either side may fuse one into an FMA), so rel_max_err (max abs
// error over max |CPU value|) <= 1e-6; features past rot_dim pass through
// exactly.
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/rope.h"
#include "kernels_cuda/cuda_test_util.h"

namespace mt {
namespace rope_cuda_test {

using test::OnGpu;
using test::rel_max_err;

struct Case {
  int64_t b, a, s, d, pos0;
  float rotary_percent;
};
const Case kCases[] = {{1, 1, 1, 2, 0, 1.f},
                       {2, 3, 7, 64, 0, 1.f},
                       {2, 5, 33, 80, 3, 0.5f},
                       {1, 4, 129, 128, 0, 1.f},
                       {3, 2, 17, 96, 100, 0.25f}};

std::string name_of(const Case& c) {
  return "(" + std::to_string(c.b) + ", " + std::to_string(c.a) + ", " + std::to_string(c.s) +
         ", " + std::to_string(c.d) + ") pos0=" + std::to_string(c.pos0);
}

TEST(RopeCuda, ForwardAndBackward) {
  MT_REQUIRE_GPU();
  for (const Case& c : kCases) {
    const RopeTable t = make_rope_table(256, c.d, c.rotary_percent, 10000.f);
    const int64_t n = c.b * c.a * c.s * c.d;
    const auto x = test::randn(n, "rope.cuda.x");
    auto want = x;
    rope_forward(want.data(), c.b, c.a, c.s, c.d, t, c.pos0);
    OnGpu<float> gx(x);
    rope_forward(gx.get(), c.b, c.a, c.s, c.d, t, c.pos0);
    const auto got = gx.host();
    EXPECT_LE(rel_max_err(got, want), 1e-6) << name_of(c);
    for (int64_t r = 0; r < c.b * c.a * c.s; ++r)  // pass-through features
      for (int64_t j = t.rot_dim; j < c.d; ++j)
        ASSERT_EQ(got[size_t(r * c.d + j)], x[size_t(r * c.d + j)]) << name_of(c);

    const auto dy = test::randn(n, "rope.cuda.dy");
    auto want_b = dy;
    rope_backward(want_b.data(), c.b, c.a, c.s, c.d, t, c.pos0);
    OnGpu<float> gdy(dy);
    rope_backward(gdy.get(), c.b, c.a, c.s, c.d, t, c.pos0);
    EXPECT_LE(rel_max_err(gdy.host(), want_b), 1e-6) << "backward, " << name_of(c);
  }
}

// A table rebuilt in the same variable (other base) must not reuse the device
// copy of the old one.
TEST(RopeCuda, RebuiltTableIsUploadedAgain) {
  MT_REQUIRE_GPU();
  const int64_t b = 2, a = 2, s = 31, d = 64;
  const auto x = test::randn(b * a * s * d, "rope.cuda.rebuilt");
  RopeTable t = make_rope_table(64, d, 1.f, 10000.f);
  OnGpu<float> g1(x);
  rope_forward(g1.get(), b, a, s, d, t, 0);
  for (float base : {500000.f, 10000.f, 50.f}) {
    t = make_rope_table(64, d, 1.f, base);
    auto want = x;
    rope_forward(want.data(), b, a, s, d, t, 0);
    OnGpu<float> gx(x);
    rope_forward(gx.get(), b, a, s, d, t, 0);
    EXPECT_LE(rel_max_err(gx.host(), want), 1e-6) << "base " << base;
  }
}

}  // namespace rope_cuda_test
}  // namespace mt
