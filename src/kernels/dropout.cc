// Dropout with a counter-based mask: element (t, bi, j) of a local
// (s_local, b, h_local) activation is kept iff dropout_keep(rng, p, g) with
//   g = ((sample0 + bi) * s_global + t0 + t) * h_global + h0 + j,
// so a sequence shard, a column shard, a micro-batch or a recompute draws the
// same mask as the whole tensor. Kept elements are scaled by 1 / (1 - p).
//
// For speed each row draws its Philox blocks in vector lanes and uses each
// block for four consecutive global indices (dropout_multipliers); the bits
// used per element are exactly those of RngStream::uniform, which the tests
// check against dropout_keep element by element, on every CPU path.
#include "kernels/dropout.h"

#include <algorithm>
#include <cstring>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/cuda/dropout.h"
#include "kernels/philox_lanes.h"

namespace mt {

// Philox blocks drawn per step: those of one dropout_run.
void dropout_multipliers(float* mult, int64_t n, uint64_t base, const RngStream& rng, float p,
                         float kept_scale) {
  alignas(64) uint32_t words[kDropoutRun];
  for (int64_t j0 = 0, len = 0; j0 < n; j0 += len) {
    const uint64_t g0 = base + uint64_t(j0);
    const int64_t off = int64_t(g0 & 3);  // position of g0 inside its block
    len = dropout_run(g0, n - j0);
    philox_blocks(words, g0 >> 2, (off + len + 3) >> 2, rng);
    // Word (g & 3) of block (g >> 2), mapped to [0, 1) as RngStream::uniform,
    // compared as dropout_keep. (24 bits convert exactly through int32, which
    // AVX2 converts in vectors; it has no unsigned conversion.)
    const uint32_t* word = words + off;
#pragma omp simd
    for (int64_t e = 0; e < len; ++e)
      mult[j0 + e] =
          float(int32_t(word[e] >> 8)) * (1.0f / 16777216.0f) >= p ? kept_scale : 0.f;
  }
}

namespace {

void check_spec(const char* who, int64_t s_local, int64_t b, int64_t h_local,
                const DropoutSpec& d) {
  MT_CHECK(d.p >= 0.f && d.p < 1.f, who, ": dropout p=", d.p,
           " is not in [0, 1); fix: use a probability below 1");
  MT_CHECK(s_local >= 0 && b >= 0 && h_local >= 0, who, ": negative shape (", s_local, ", ", b,
           ", ", h_local, ")");
  if (d.p == 0.f) return;  // identity: the index layout is not used
  MT_CHECK(d.t0 >= 0 && d.t0 + s_local <= d.s_global, who, ": sequence shard [", d.t0, ", ",
           d.t0 + s_local, ") is outside s_global=", d.s_global,
           "; fix: set DropoutSpec.s_global / t0 for this shard");
  MT_CHECK(d.h0 >= 0 && d.h0 + h_local <= d.h_global, who, ": column shard [", d.h0, ", ",
           d.h0 + h_local, ") is outside h_global=", d.h_global,
           "; fix: set DropoutSpec.h_global / h0 for this shard");
  MT_CHECK(d.sample0 >= 0, who, ": sample0=", d.sample0, " is negative");
}

// Calls op(k0, mul, len) for consecutive runs of elements, k0 the local offset
// of the run and mul[e] either 1/(1-p) (kept) or 0 (dropped) for element
// k0 + e. Rows (t, bi) are split across threads.
template <typename Op>
void for_each_masked(int64_t s_local, int64_t b, int64_t h_local, const DropoutSpec& d, Op op) {
  const float scale = float(1.0 / (1.0 - double(d.p)));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t t = 0; t < s_local; ++t) {
    for (int64_t bi = 0; bi < b; ++bi) {
      const int64_t row = (t * b + bi) * h_local;
      const uint64_t base =
          uint64_t(((d.sample0 + bi) * d.s_global + d.t0 + t) * d.h_global + d.h0);
      alignas(64) float mul[kDropoutRun];
      for (int64_t j0 = 0, len = 0; j0 < h_local; j0 += len) {
        len = dropout_run(base + uint64_t(j0), h_local - j0);
        dropout_multipliers(mul, len, base + uint64_t(j0), d.rng, d.p, scale);
        op(row + j0, mul, len);
      }
    }
  }
}

}  // namespace

namespace {
template <class To, class Tr>
void add_impl(To* out, const float* x, const Tr* residual, int64_t s_local, int64_t b,
              int64_t h_local, const DropoutSpec& d) {
  if (d.p == 0.f) {
    const int64_t n = s_local * b * h_local;
#pragma omp parallel for simd schedule(static)
    for (int64_t k = 0; k < n; ++k) store_f32(out, k, load_f32(residual, k) + x[k]);
    return;
  }
  for_each_masked(s_local, b, h_local, d, [=](int64_t k0, const float* mul, int64_t len) {
#pragma omp simd
    for (int64_t e = 0; e < len; ++e)
      store_f32(out, k0 + e, load_f32(residual, k0 + e) + x[k0 + e] * mul[e]);
  });
}

template <class To>
void forward_impl(To* out, const float* x, int64_t s_local, int64_t b, int64_t h_local,
                  const DropoutSpec& d) {
  if (d.p == 0.f) {
    convert(out, x, s_local * b * h_local);
    return;
  }
  for_each_masked(s_local, b, h_local, d, [=](int64_t k0, const float* mul, int64_t len) {
#pragma omp simd
    for (int64_t e = 0; e < len; ++e) store_f32(out, k0 + e, x[k0 + e] * mul[e]);
  });
}
}  // namespace

// out (s_local, b, h_local) = residual + dropout(x)         [out: =; may alias residual]
void dropout_add_forward(WriteView out, const float* x, ReadView residual, int64_t s_local,
                         int64_t b, int64_t h_local, const DropoutSpec& d) {
  check_spec("dropout_add_forward", s_local, b, h_local, d);
  if (MT_ON_DEVICE(out.raw()))
    return cuda::dropout_add_forward(out, x, residual, s_local, b, h_local, d);
  visit(out, [&](auto* y) {
    visit(residual, [&](const auto* r) { add_impl(y, x, r, s_local, b, h_local, d); });
  });
}

// out = dropout(x)                                          [out: =; may alias x]
void dropout_forward(WriteView out, const float* x, int64_t s_local, int64_t b, int64_t h_local,
                     const DropoutSpec& d) {
  check_spec("dropout_forward", s_local, b, h_local, d);
  if (out.f32 == x && d.p == 0.f) return;
  if (MT_ON_DEVICE(out.raw())) return cuda::dropout_forward(out, x, s_local, b, h_local, d);
  visit(out, [&](auto* y) { forward_impl(y, x, s_local, b, h_local, d); });
}

// dx = mask * dout / (1 - p)                                [dx: =; may alias dout]
void dropout_backward(float* dx, const float* dout, int64_t s_local, int64_t b, int64_t h_local,
                      const DropoutSpec& d) {
  check_spec("dropout_backward", s_local, b, h_local, d);
  if (MT_ON_DEVICE(dx)) return cuda::dropout_backward(dx, dout, s_local, b, h_local, d);
  if (d.p == 0.f) {
    if (dx != dout) std::memcpy(dx, dout, size_t(s_local * b * h_local) * sizeof(float));
    return;
  }
  for_each_masked(s_local, b, h_local, d, [=](int64_t k0, const float* mul, int64_t len) {
#pragma omp simd
    for (int64_t e = 0; e < len; ++e) dx[k0 + e] = dout[k0 + e] * mul[e];
  });
}

}  // namespace mt
