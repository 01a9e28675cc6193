// Dropout whose mask is a pure function of (seed, site, iteration, global
// element index), so every parallel layout, and recompute, draws the same mask.
// Masks are regenerated in backward, never stored.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "kernels/precision.h"

namespace mt {

// Activation (s_local, b, h) rows; element (t, bi, j) has the global index
// ((sample0 + bi) * s_global + t0 + t) * h_global + h0 + j, where sample0 is the
// global index of the micro-batch's first sample in the run, t0 the first
// sequence position of this (sequence-parallel) shard, h0 the first hidden
// column of this shard.
struct DropoutSpec {
  RngStream rng;  // key = (seed, site name), step = iteration
  float p = 0.f;
  int64_t s_global = 0, t0 = 0, h_global = 0, h0 = 0;
  int64_t sample0 = 0;
};

// out (s_local, b, h_local) = residual + dropout(x)         [out: =; may alias residual]
// out and residual: fp32 or bf16 storage (a bf16 run's residual stream).
void dropout_add_forward(WriteView out, const float* x, ReadView residual, int64_t s_local,
                         int64_t b, int64_t h_local, const DropoutSpec& d);
// out = dropout(x)                                          [out: =; may alias x]
void dropout_forward(WriteView out, const float* x, int64_t s_local, int64_t b, int64_t h_local,
                     const DropoutSpec& d);
// dx = mask * dout / (1 - p)                                [dx: =; may alias dout]
void dropout_backward(float* dx, const float* dout, int64_t s_local, int64_t b, int64_t h_local,
                      const DropoutSpec& d);

// True if element `index` is kept (the one definition of the mask).
inline bool dropout_keep(const RngStream& rng, float p, uint64_t index) {
  return rng.uniform(index) >= p;
}

// mult (n) [=]: mult[j] = dropout_keep(rng, p, base + j) ? kept_scale : 0, the
// mask of a run of consecutive global indices, each Philox block drawn once
// for its four elements in vector lanes (philox_lanes.h): the same bits on
// every CPU path. For the kernels that fuse a mask into their own loops
// (dropout here, attention's probabilities), over runs of dropout_run().
void dropout_multipliers(float* mult, int64_t n, uint64_t base, const RngStream& rng, float p,
                         float kept_scale);

// Elements of the run that starts at global index g with `left` to go: at
// most kDropoutRun, ending on a Philox block boundary (32 whole blocks, two
// AVX-512 or four AVX2 registers, once the first run has aligned the rest).
constexpr int64_t kDropoutRun = 128;
inline int64_t dropout_run(uint64_t g, int64_t left) {
  const int64_t room = kDropoutRun - int64_t(g & 3);
  return left < room ? left : room;
}

}  // namespace mt
