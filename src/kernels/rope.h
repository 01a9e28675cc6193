// Rotary position embedding (RoPE), Megatron core's default non-interleaved
// "rotate half" convention, the same as Hugging Face Llama's: features
// [0, rot_dim) of each head vector are split into halves x1 = x[0:half],
// x2 = x[half:rot_dim] (half = rot_dim / 2) and rotated pairwise,
//   y1 = x1 cos - x2 sin,  y2 = x2 cos + x1 sin,
// by the angle pos * inv_freq[i] of column i; features [rot_dim, d) pass
// through (--rotary-percent < 1).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/rope_scaling.h"

namespace mt {

// cos/sin of every (position, frequency) pair, built once per model.
struct RopeTable {
  int64_t max_pos = 0, rot_dim = 0;
  std::vector<float> cos, sin;  // (max_pos, rot_dim / 2)
};

// rot_dim = int(head_dim * rotary_percent) (even, > 0);
// inv_freq[i] = 1 / base^(2i / rot_dim) and angle = float(pos) * inv_freq[i],
// both in float32 as torch computes them; cos/sin of that float angle in double,
// rounded to float. `scaling` (enabled): Llama 3.1's scaling of inv_freq
// (kernels/rope_scaling.h) before the angles; (yarn): YaRN's, and cos/sin
// times its concentration factor (the rotation is then scaled: backward is
// still its transpose).
RopeTable make_rope_table(int64_t max_pos, int64_t head_dim, float rotary_percent, float base,
                          const RopeScaling& scaling = {});

// x (b, a, s, d) =, in place; sequence index t is at position pos0 + t
// (pos0 > 0: a decode step or a later chunk of the sequence).
void rope_forward(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                  int64_t pos0);
// dx (b, a, s, d) =, in place: the transpose (inverse rotation),
// dx1 = dy1 cos + dy2 sin,  dx2 = dy2 cos - dy1 sin.
void rope_backward(float* dx, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                   int64_t pos0);

// The same with each token's own position (Megatron's --reset-position-ids:
// positions restart in every document): row t of sample bi is at
// positions[t * b + bi] (sequence-first, as the model's position ids). CPU only.
void rope_forward_at(float* x, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                     const int32_t* positions);
void rope_backward_at(float* dx, int64_t b, int64_t a, int64_t s, int64_t d, const RopeTable& t,
                      const int32_t* positions);

}  // namespace mt
