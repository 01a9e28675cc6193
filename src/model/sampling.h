// Picking the next token from logits: greedy (temperature 0), or sampling
// with temperature, top-k and top-p (nucleus), from a seeded counter RNG.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace mt {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 → greedy
  int64_t top_k = 0;         // 0 → off
  float top_p = 0.f;         // 0 or 1 → off
};

// logits (v); only ids < vocab_size are candidates (padding excluded).
// `draw` indexes the RNG stream so a seed gives the same text every time.
int32_t sample_token(const float* logits, int64_t vocab_size, const SamplingConfig& cfg,
                     const RngStream& rng, uint64_t draw, std::vector<float>& scratch);

// Natural-log probability of `token` under softmax(logits) over the real
// vocabulary (no padding rows), at temperature 1, in double.
double log_prob(const float* logits, int64_t vocab_size, int32_t token);

// The n most likely tokens and their log-probabilities (as log_prob's), most
// likely first; ties by the smaller id.
std::vector<std::pair<int32_t, double>> top_log_probs(const float* logits, int64_t vocab_size,
                                                      int64_t n);

}  // namespace mt
