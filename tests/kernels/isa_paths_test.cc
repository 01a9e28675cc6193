// Every kernel with CPU paths (kernels/cpu_isa.h) gives the scalar path's
// numbers on every other path this machine has: to 1e-6 relative to each
// output's largest entry (sums' order follows the register width, and a
// column sum such as dweight cancels terms far larger than itself); the
// element-wise kernels bit for bit. Each case runs the kernel from the same inputs and returns its
// outputs; the harness runs it once per path and compares with the scalar
// run. The paths' own correctness (against references, finite differences)
// is the kernels' tests; dropout, Philox and zeroing are in cpu_isa_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/cpu_isa.h"
#include "kernels/cross_entropy.h"
#include "kernels/gelu.h"
#include "kernels/kernel_test_util.h"
#include "kernels/layernorm.h"
#include "kernels/precision.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/squared_relu.h"
#include "kernels/swiglu.h"

namespace mt {
namespace isa_paths_test {

using test::randn;
using Outputs = std::map<std::string, std::vector<float>>;

// Runs `kernel` on every path and compares each output with the scalar
// path's: |x - x_scalar| <= rel * max(1, max |x_scalar|) (inputs are O(1)).
void expect_paths_agree(const std::function<Outputs()>& kernel, double rel = 1e-6) {
  Outputs scalar;
  test::for_each_isa([&](Isa isa) {
    Outputs out = kernel();
    if (isa == Isa::kScalar) return scalar = std::move(out), void();
    for (const auto& [name, x] : out) {
      const std::vector<float>& want = scalar.at(name);
      ASSERT_EQ(x.size(), want.size()) << name;
      double scale = 1;
      for (float w : want) scale = std::isfinite(w) ? std::max(scale, double(std::fabs(w))) : scale;
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] == want[i]) continue;  // (infinities too)
        const double err = std::fabs(double(x[i]) - double(want[i]));
        worst = std::max(worst, err / scale);
        ASSERT_LE(err, rel * scale)
            << name << "[" << i << "]: " << x[i] << " vs scalar path " << want[i];
      }
      if (worst > 0)  // (the numbers of the report: how far the paths are apart)
        std::printf("  %s %s: largest difference from scalar %.2g\n", isa_name(isa),
                    name.c_str(), worst);
    }
  });
}

constexpr int64_t kRows = 48, kHidden = 768;

TEST(IsaPaths, LayerNorm) {
  const int64_t n = kRows, c = kHidden;
  const auto x = randn(n * c, "ln.x", 2.f, 0.5f), w = randn(c, "ln.w"), b = randn(c, "ln.b");
  const auto dy = randn(n * c, "ln.dy");
  expect_paths_agree([&] {
    Outputs o{{"out", std::vector<float>(size_t(n * c))}, {"mean", std::vector<float>(size_t(n))},
              {"rstd", std::vector<float>(size_t(n))}, {"dinp", std::vector<float>(size_t(n * c))},
              {"dweight", std::vector<float>(size_t(c))}, {"dbias", std::vector<float>(size_t(c))}};
    layernorm_forward(o["out"].data(), o["mean"].data(), o["rstd"].data(), x.data(), w.data(),
                      b.data(), n, c, 1e-5f);
    layernorm_backward(o["dinp"].data(), o["dweight"].data(), o["dbias"].data(), dy.data(),
                       x.data(), w.data(), o["mean"].data(), o["rstd"].data(), n, c);
    return o;
  });
}

TEST(IsaPaths, RmsNorm) {
  const int64_t n = kRows, c = kHidden;
  const auto x = randn(n * c, "rms.x"), w = randn(c, "rms.w"), dy = randn(n * c, "rms.dy");
  expect_paths_agree([&] {
    Outputs o{{"out", std::vector<float>(size_t(n * c))}, {"rstd", std::vector<float>(size_t(n))},
              {"dinp", std::vector<float>(size_t(n * c))},
              {"dweight", std::vector<float>(size_t(c))}};
    rmsnorm_forward(o["out"].data(), o["rstd"].data(), x.data(), w.data(), n, c, 1e-5f);
    rmsnorm_backward(o["dinp"].data(), o["dweight"].data(), dy.data(), x.data(), w.data(),
                     o["rstd"].data(), n, c);
    return o;
  });
}

TEST(IsaPaths, Activations) {
  const int64_t n = kRows * kHidden + 5;  // a tail past whole registers
  const auto x = randn(n, "act.x", 3.f), dy = randn(n, "act.dy");
  expect_paths_agree([&] {
    Outputs o;
    for (const char* k : {"gelu", "dgelu", "relu2", "drelu2"}) o[k].resize(size_t(n));
    gelu_forward(o["gelu"].data(), x.data(), n);
    gelu_backward(o["dgelu"].data(), x.data(), dy.data(), n);
    squared_relu_forward(o["relu2"].data(), x.data(), n);
    squared_relu_backward(o["drelu2"].data(), x.data(), dy.data(), n);
    return o;
  }, 0.0);  // element-wise: bit for bit
}

TEST(IsaPaths, SwiGlu) {
  const int64_t n = kRows, f = 1000;
  const auto in = randn(n * 2 * f, "swiglu.in", 2.f), dy = randn(n * f, "swiglu.dy");
  expect_paths_agree([&] {
    Outputs o{{"out", std::vector<float>(size_t(n * f))},
              {"din", std::vector<float>(size_t(n * 2 * f))}};
    swiglu_forward(o["out"].data(), in.data(), n, f);
    swiglu_backward(o["din"].data(), in.data(), dy.data(), n, f);
    return o;
  }, 0.0);
}

TEST(IsaPaths, Rope) {
  const int64_t b = 2, a = 4, s = 64, d = 64;
  const RopeTable t = make_rope_table(128, d, 1.f, 10000.f);
  const auto x = randn(b * a * s * d, "rope.x");
  expect_paths_agree([&] {
    Outputs o{{"fwd", x}, {"bwd", x}};
    rope_forward(o["fwd"].data(), b, a, s, d, t, 3);
    rope_backward(o["bwd"].data(), b, a, s, d, t, 3);
    return o;
  }, 0.0);
}

TEST(IsaPaths, CrossEntropy) {
  const int64_t n = 16, v = 5003;
  const auto logits = randn(n * v, "ce.logits", 3.f);
  std::vector<int32_t> targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) targets[size_t(i)] = int32_t((i * 977) % v);
  expect_paths_agree([&] {
    Outputs o{{"losses", std::vector<float>(size_t(n))}, {"grad", logits}};
    softmax_cross_entropy(o["losses"].data(), o["grad"].data(), targets.data(), n, v, 1.f / n);
    return o;
  });
}

TEST(IsaPaths, AdamW) {
  const int64_t n = 10007;
  const auto p = randn(n, "adamw.p"), g = randn(n, "adamw.g", 1e-2f);
  AdamWHyper h;
  h.weight_decay = 0.1f;
  expect_paths_agree([&] {
    Outputs o{{"param", p}, {"m", std::vector<float>(size_t(n), 0.01f)},
              {"v", std::vector<float>(size_t(n), 1e-4f)}, {"copy", {}}};
    std::vector<uint16_t> copy(static_cast<size_t>(n));
    for (int64_t step = 1; step <= 3; ++step)
      adamw_step(o["param"].data(), g.data(), o["m"].data(), o["v"].data(), n, h, step,
                 copy.data());
    for (uint16_t c : copy) o["copy"].push_back(f32_from_bf16(c));
    return o;
  }, 0.0);
}

TEST(IsaPaths, Casts) {
  const int64_t n = (int64_t(1) << 16) + 3;  // past the parallel threshold, and a tail
  auto x = randn(n, "casts.x", 1000.f);
  x[0] = std::nanf("");
  x[1] = 3.4e38f;  // rounds to bf16 inf
  x[2] = 1e-7f;    // fp16 subnormal
  expect_paths_agree([&] {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    Outputs o{{"bf16", std::vector<float>(size_t(n))}, {"f16", std::vector<float>(size_t(n))}};
    f32_to_bf16(h.data(), x.data(), n);
    bf16_to_f32(o["bf16"].data(), h.data(), n);
    round_to_f16(o["f16"].data(), x.data(), n);
    for (auto* out : {&o["bf16"], &o["f16"]})  // NaN != NaN: compare it as a number
      (*out)[0] = std::isnan((*out)[0]) ? 12345.f : -1.f;
    return o;
  }, 0.0);
}

// Attention's row passes stay on the build's code (attention.cc): its only
// path is the dropout mask's. Without dropout, this shape's AVX2 and AVX-512
// paths take the small-head kernels (attention_small.h, which the scalar path
// never takes): their own sums, to round-off.
TEST(IsaPaths, Attention) {
  const AttentionDims dm{2, 3, kAttentionBlockQ + 37, 16};
  const int64_t n = dm.b * dm.a * dm.s * dm.d;
  const auto q = randn(n, "q"), k = randn(n, "k"), v = randn(n, "v"), g = randn(n, "g");
  expect_paths_agree([&] {
    Outputs o{{"ctx", std::vector<float>(size_t(n))},
              {"lse", std::vector<float>(size_t(dm.b * dm.a * dm.s))},
              {"dq", std::vector<float>(size_t(n))}, {"dk", std::vector<float>(size_t(n))},
              {"dv", std::vector<float>(size_t(n))}};
    std::vector<float> ws(static_cast<size_t>(attention_workspace_floats(dm)));
    attention_forward(o["ctx"].data(), o["lse"].data(), q.data(), k.data(), v.data(), dm, {},
                      ws.data());
    attention_backward(o["dq"].data(), o["dk"].data(), o["dv"].data(), g.data(), q.data(),
                       k.data(), v.data(), o["ctx"].data(), o["lse"].data(), dm, {}, ws.data());
    return o;
  });
}

}  // namespace isa_paths_test
}  // namespace mt
