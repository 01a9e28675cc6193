// Llama 3.1 frequency scaling of the RoPE inverse frequencies (host, once per
// model). Every step is float32, as the torch code it reproduces.
#include "kernels/rope_scaling.h"

#include <cmath>

#include "core/error.h"

namespace mt {

void check_rope_scaling(const RopeScaling& s) {
  if (!s.enabled) return;
  MT_CHECK(std::isfinite(s.factor) && s.factor >= 1.f, "--rope-scaling-factor ", s.factor,
           " must be a finite number >= 1 (Llama 3.1 uses 8, Llama 3.2 32)");
  MT_CHECK(std::isfinite(s.low_freq_factor) && s.low_freq_factor > 0.f,
           "--rope-scaling-low-freq-factor ", s.low_freq_factor,
           " must be a finite number > 0 (Llama 3.x uses 1)");
  MT_CHECK(std::isfinite(s.high_freq_factor) && s.high_freq_factor > s.low_freq_factor,
           "--rope-scaling-high-freq-factor ", s.high_freq_factor,
           " must be finite and greater than --rope-scaling-low-freq-factor ", s.low_freq_factor,
           " (Llama 3.x uses 4 and 1)");
  MT_CHECK(s.original_max_position_embeddings > 0,
           "--rope-scaling-original-max-position-embeddings ", s.original_max_position_embeddings,
           " must be > 0 (Llama 3.x uses 8192)");
}

void rope_scale_inv_freq(float* inv_freq, int64_t n, const RopeScaling& s) {
  if (!s.enabled) return;
  check_rope_scaling(s);
  const float two_pi = float(2.0 * M_PI);
  const float old_len = float(s.original_max_position_embeddings);
  // Python floats (double) compared against the float32 wavelengths: torch
  // casts the scalar to float32.
  const float low_wavelen = float(double(s.original_max_position_embeddings) / s.low_freq_factor);
  const float high_wavelen = float(double(s.original_max_position_embeddings) / s.high_freq_factor);
  const float span = float(double(s.high_freq_factor) - double(s.low_freq_factor));
  for (int64_t i = 0; i < n; ++i) {
    const float f = inv_freq[i];
    const float wavelen = (1.f / f) * two_pi;
    const float base = wavelen > low_wavelen ? f / s.factor : f;  // torch.where(low, f / factor, f)
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (!medium) {
      inv_freq[i] = base;
      continue;
    }
    const float t = ((1.f / wavelen) * old_len - s.low_freq_factor) / span;
    inv_freq[i] = (1.f - t) * base / s.factor + t * base;
  }
}

}  // namespace mt
