// The named dropout sites of the GPT model and how their masks are keyed:
// (seed, site name) → Philox key, iteration → counter, global element index
// → counter. Any layout or recompute of the same step draws the same mask.
#pragma once
#include <algorithm>
#include <string>

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "model/gpt_shapes.h"

namespace mt {

inline DropoutSpec hidden_dropout_spec(const GptShapes& sh, const PassContext& ctx,
                                       const std::string& site, int64_t sample0) {
  DropoutSpec d;
  d.rng = RngStream::make(ctx.seed, "dropout." + site, uint64_t(ctx.iteration));
  d.p = ctx.training ? sh.hidden_dropout : 0.f;
  d.s_global = sh.s_global;
  d.t0 = sh.t0;  // of a contiguous slab; the calls below set it per run of global positions
  d.h_global = sh.h;
  d.h0 = 0;
  d.sample0 = sample0;
  return d;
}

// The slab [t0, t0 + s_local) of this rank's rows as runs contiguous in
// global position: one run, or with context parallelism up to two (a slab
// may straddle the rank's two chunks). f(first row in the slab, rows, global
// position of the first).
template <class F>
void for_each_position_run(const GptShapes& sh, F f) {
  const int64_t c = sh.chunk_len();
  int64_t row = 0;
  while (row < sh.s_local) {
    const int64_t r = sh.t0 + row;  // this rank's row
    const int64_t rows = std::min(sh.s_local - row, c - r % c);
    f(row, rows, sh.global_position(r));
    row += rows;
  }
}

// Hidden dropout over the slab (s_local, b, h), keyed by global positions.
inline void hidden_dropout_add_forward(const GptShapes& sh, WriteView out, const float* x,
                                       ReadView residual, DropoutSpec d) {
  for_each_position_run(sh, [&](int64_t row, int64_t rows, int64_t pos) {
    const int64_t off = row * sh.b * sh.h;
    d.t0 = pos;
    dropout_add_forward(out.at(off), x + off, residual.at(off), rows, sh.b, sh.h, d);
  });
}
inline void hidden_dropout_forward(const GptShapes& sh, WriteView out, const float* x,
                                   DropoutSpec d) {
  for_each_position_run(sh, [&](int64_t row, int64_t rows, int64_t pos) {
    const int64_t off = row * sh.b * sh.h;
    d.t0 = pos;
    dropout_forward(out.at(off), x + off, rows, sh.b, sh.h, d);
  });
}
inline void hidden_dropout_backward(const GptShapes& sh, float* dx, const float* dout,
                                    DropoutSpec d) {
  for_each_position_run(sh, [&](int64_t row, int64_t rows, int64_t pos) {
    const int64_t off = row * sh.b * sh.h;
    d.t0 = pos;
    dropout_backward(dx + off, dout + off, rows, sh.b, sh.h, d);
  });
}

// The attention of this rank's rows (all s of them; with CP the ring's
// per-rank dims, whose blocks are chunk pairs).
inline AttentionDims attention_dims(const GptShapes& sh) {
  AttentionDims dims;
  dims.b = sh.b;
  dims.a = sh.a;
  dims.s = sh.s;
  dims.d = sh.d;
  dims.math = sh.cm.math;
  dims.s_global = sh.s_global;
  dims.window_left = sh.window_left;
  return dims;
}

inline AttentionDropout attention_dropout_spec(const GptShapes& sh, const PassContext& ctx,
                                               int64_t layer, int64_t sample0) {
  AttentionDropout d;
  d.rng = RngStream::make(ctx.seed, "dropout.layer" + std::to_string(layer) + ".attention_probs",
                          uint64_t(ctx.iteration));
  d.p = ctx.training ? sh.attention_dropout : 0.f;
  d.sample0 = sample0;
  d.a_global = sh.a_global;
  d.head0 = sh.head0;
  return d;
}

}  // namespace mt
