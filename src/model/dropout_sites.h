// The named dropout sites of the GPT model and how their masks are keyed:
// (seed, site name) → Philox key, iteration → counter, global element index
// → counter. Any layout or recompute of the same step draws the same mask.
#pragma once
#include <string>

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "model/gpt.h"

namespace mt {

inline DropoutSpec hidden_dropout_spec(const GptShapes& sh, const PassContext& ctx,
                                       const std::string& site, int64_t sample0) {
  DropoutSpec d;
  d.rng = RngStream::make(ctx.seed, "dropout." + site, uint64_t(ctx.iteration));
  d.p = ctx.training ? sh.hidden_dropout : 0.f;
  d.s_global = sh.s;
  d.t0 = sh.t0;
  d.h_global = sh.h;
  d.h0 = 0;
  d.sample0 = sample0;
  return d;
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
