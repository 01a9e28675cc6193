// Llama 3.1's RoPE frequency scaling: Megatron core's
// RotaryEmbedding._apply_scaling (--use-rope-scaling, --rope-scaling-factor;
// Megatron fixes the other three at 1, 4, 8192) and Hugging Face's
// rope_scaling {"rope_type": "llama3"} (modeling_rope_utils'
// _compute_llama3_parameters). With L = original_max_position_embeddings,
// lo = low_freq_factor, hi = high_freq_factor and the wavelength
// w = 2 pi / inv_freq of each column:
//   w < L / hi   (high frequencies)  inv_freq unchanged,
//   w > L / lo   (low frequencies)   inv_freq / factor,
//   otherwise    (between)           (1 - t) inv_freq / factor + t inv_freq,
//                                    t = (L / w - lo) / (hi - lo).
#pragma once
#include <cstdint>

namespace mt {

struct RopeScaling {
  bool enabled = false;  // off: inv_freq as computed (plain RoPE)
  float factor = 8.f;
  float low_freq_factor = 1.f;
  float high_freq_factor = 4.f;
  int64_t original_max_position_embeddings = 8192;
};

// Throws mt::Error naming the flag and the fix when a value is out of range
// (factor >= 1, 0 < low < high, original positions > 0), as HF's
// _validate_llama3_parameters refuses them. Nothing is checked when disabled.
void check_rope_scaling(const RopeScaling& s);

// inv_freq (n) =, in place: scaled as above when s.enabled, in float32 with
// torch's order of operations (x / tensor is reciprocal(tensor) * x).
void rope_scale_inv_freq(float* inv_freq, int64_t n, const RopeScaling& s);

}  // namespace mt
