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
//
// YaRN (Megatron core's YarnRotaryEmbedding; DeepSeek-V2/V3's rope_scaling
// {"type": "yarn"}): with the rotary dimension D, base B, factor f and
// L = original_max_position_embeddings, the correction range
//   dim(r) = D ln(L / (2 pi r)) / (2 ln B),
//   low = max(floor(dim(beta_fast)), 0), high = min(ceil(dim(beta_slow)), D - 1),
// a ramp m_i = clamp((i - low) / (high - low), 0, 1) over the D/2 columns, and
//   inv_freq_i = inv_freq_i / f · m_i + inv_freq_i · (1 - m_i)
// (columns of short wavelength keep their frequency, long ones are
// interpolated by f). cos and sin are multiplied by the concentration factor
//   yarn_mscale(f, mscale) / yarn_mscale(f, mscale_all_dim),
//   yarn_mscale(f, m) = 1 for f <= 1, else 0.1 m ln f + 1.
#pragma once
#include <cstdint>

namespace mt {

struct RopeScaling {
  bool enabled = false;  // off: inv_freq as computed (plain RoPE)
  float factor = 8.f;
  float low_freq_factor = 1.f;
  float high_freq_factor = 4.f;
  int64_t original_max_position_embeddings = 8192;
  // YaRN (not with the Llama 3.1 scaling above).
  bool yarn = false;
  float yarn_factor = 1.f;                        // --rotary-scaling-factor
  int64_t yarn_original_max_position_embeddings = 4096;
  float beta_fast = 32.f, beta_slow = 1.f;        // --yarn-beta-fast, --yarn-beta-slow
  float mscale = 1.f, mscale_all_dim = 0.f;       // --mscale, --mscale-all-dim
};

// YaRN's attention scale yarn_mscale(factor, m) (1 for factor <= 1).
double yarn_mscale(double factor, double m);
// What cos and sin are multiplied by: YaRN's concentration factor, else 1.
float rope_cos_sin_factor(const RopeScaling& s);

// Throws mt::Error naming the flag and the fix when a value is out of range
// (factor >= 1, 0 < low < high, original positions > 0), as HF's
// _validate_llama3_parameters refuses them. Nothing is checked when disabled.
void check_rope_scaling(const RopeScaling& s);

// inv_freq (n) =, in place: scaled as above when s.enabled (or s.yarn), in
// float32 with torch's order of operations (x / tensor is reciprocal(tensor)
// * x). `base`: the rotary base (YaRN's interpolated frequencies are
// 1 / (factor · base^(2i/D)), computed so).
void rope_scale_inv_freq(float* inv_freq, int64_t n, const RopeScaling& s, float base = 10000.f);

}  // namespace mt
