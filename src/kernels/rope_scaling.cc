// Llama 3.1 frequency scaling of the RoPE inverse frequencies (host, once per
// model). Every step is float32, as the torch code it reproduces.
#include "kernels/rope_scaling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mt {

namespace {
void check_yarn(const RopeScaling& s) {
  MT_CHECK(!s.enabled, "YaRN and --use-rope-scaling (Llama 3.1's) were both asked for; fix: "
           "leave out --use-rope-scaling");
  MT_CHECK(std::isfinite(s.yarn_factor) && s.yarn_factor > 0.f, "--rotary-scaling-factor ",
           s.yarn_factor, " must be a finite number > 0 (DeepSeek-V3 uses 40; 1: no scaling)");
  MT_CHECK(s.yarn_original_max_position_embeddings > 0,
           "--yarn-original-max-position-embeddings ", s.yarn_original_max_position_embeddings,
           " must be > 0 (DeepSeek-V3 uses 4096)");
  MT_CHECK(std::isfinite(s.beta_fast) && std::isfinite(s.beta_slow) && s.beta_fast > 0.f &&
               s.beta_slow > 0.f,
           "--yarn-beta-fast ", s.beta_fast, " and --yarn-beta-slow ", s.beta_slow,
           " must be finite numbers > 0 (Megatron's defaults: 32 and 1)");
  MT_CHECK(std::isfinite(s.mscale) && std::isfinite(s.mscale_all_dim), "--mscale ", s.mscale,
           " and --mscale-all-dim ", s.mscale_all_dim, " must be finite numbers");
}

// Megatron's _yarn_find_correction_dim (Python floats: double).
double yarn_correction_dim(double rotations, int64_t dim, double base, int64_t original) {
  return double(dim) * std::log(double(original) / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

void yarn_inv_freq(float* inv_freq, int64_t n, const RopeScaling& s, float base) {
  const int64_t dim = 2 * n;
  double low = std::floor(yarn_correction_dim(s.beta_fast, dim, base,
                                              s.yarn_original_max_position_embeddings));
  double high = std::ceil(yarn_correction_dim(s.beta_slow, dim, base,
                                               s.yarn_original_max_position_embeddings));
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // as Megatron's _yarn_linear_ramp_mask
  const float flow = float(low), span = float(high - low);  // torch: float32 arange minus scalars
  for (int64_t i = 0; i < n; ++i) {
    const float ramp = std::clamp((float(i) - flow) / span, 0.f, 1.f);
    const float keep = 1.f - ramp;  // inv_freq_mask
    const float extra = inv_freq[i];
    const float inter = 1.f / (s.yarn_factor * std::pow(base, float(2 * i) / float(dim)));
    inv_freq[i] = inter * (1.f - keep) + extra * keep;
  }
}
}  // namespace

double yarn_mscale(double factor, double m) {
  return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

float rope_cos_sin_factor(const RopeScaling& s) {
  if (!s.yarn) return 1.f;
  return float(yarn_mscale(s.yarn_factor, s.mscale) / yarn_mscale(s.yarn_factor, s.mscale_all_dim));
}

void check_rope_scaling(const RopeScaling& s) {
  if (s.yarn) check_yarn(s);
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

void rope_scale_inv_freq(float* inv_freq, int64_t n, const RopeScaling& s, float base) {
  check_rope_scaling(s);
  if (s.yarn) return yarn_inv_freq(inv_freq, n, s, base);
  if (!s.enabled) return;
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
