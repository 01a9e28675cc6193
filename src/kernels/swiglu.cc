// SwiGLU forward/backward (fp32, OpenMP over rows; rows are independent, so
// results do not depend on the thread count).
//   out   = silu(g) u,  silu(g) = g s,  s = sigmoid(g)
//   dg    = dout u s (1 + g (1 - s))   (silu'(g) = s + g s (1 - s))
//   du    = dout g s
// sigmoid is evaluated from e = exp(-|g|) <= 1 (s = 1 / (1 + e) for g >= 0,
// e / (1 + e) for g < 0), so no intermediate overflows for large |g| and small
// sigmoids keep their relative accuracy; exp is vec_math.h's vectorised one.
#include "kernels/swiglu.h"

#include <cmath>
#include <cstdint>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/cuda/swiglu.h"
#include "kernels/vec_math.h"

namespace mt {

namespace {

#pragma omp declare simd
inline float sigmoid(float x) {
  const float e = exp_f32(-std::fabs(x));
  const float r = 1.f / (1.f + e);
  return x >= 0.f ? r : e * r;
}


template <class To, class Ti>
void forward_impl(To* out, const Ti* in, int64_t n, int64_t f) {
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    const Ti* g = in + i * 2 * f;
    const Ti* u = g + f;
    To* y = out + i * f;
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) {
      const float x = load_f32(g, j);
      store_f32(y, j, x * sigmoid(x) * load_f32(u, j));
    }
  });
}

template <class Ti>
void backward_impl(float* din, const Ti* in, const float* dout, int64_t n, int64_t f) {
  const Isa isa = active_isa();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) on_isa(isa, [=] {
    const Ti* g = in + i * 2 * f;
    const Ti* u = g + f;
    const float* dy = dout + i * f;
    float* dg = din + i * 2 * f;
    float* du = dg + f;
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) {
      const float x = load_f32(g, j), s = sigmoid(x);
      dg[j] = dy[j] * load_f32(u, j) * (s * (1.f + x * (1.f - s)));
      du[j] = dy[j] * (x * s);
    }
  });
}

}  // namespace

// out (n, f) =
void swiglu_forward(WriteView out, ReadView in, int64_t n, int64_t f) {
  MT_CHECK(n >= 0 && f > 0, "swiglu_forward: bad shape n=", n, " f=", f,
           "; fix: pass the row count and the (per-half) FFN width f of in (n, 2f)");
  if (MT_ON_DEVICE(out.raw())) return cuda::swiglu_forward(out, in, n, f);
  visit(out, [&](auto* y) { visit(in, [&](const auto* x) { forward_impl(y, x, n, f); }); });
}

// din (n, 2f) =
void swiglu_backward(float* din, ReadView in, const float* dout, int64_t n, int64_t f) {
  MT_CHECK(n >= 0 && f > 0, "swiglu_backward: bad shape n=", n, " f=", f,
           "; fix: pass the row count and the (per-half) FFN width f of in (n, 2f)");
  const auto addr = [](const float* p) { return reinterpret_cast<uintptr_t>(p); };
  MT_CHECK(n == 0 || addr(din) >= addr(dout + n * f) || addr(dout) >= addr(din + n * 2 * f),
           "swiglu_backward: din overlaps dout; fix: give din its own (n, 2f) buffer");
  if (MT_ON_DEVICE(din)) return cuda::swiglu_backward(din, in, dout, n, f);
  visit(in, [&](const auto* x) { backward_impl(din, x, dout, n, f); });
}

}  // namespace mt
