#include "kernels/attention_decode.h"

#include <algorithm>
#include <cmath>

namespace mt {

void attention_decode_forward(float* ctx, const float* q_all, const float* k_cache,
                              const float* v_cache, int64_t a, int64_t g, int64_t d, int64_t pos,
                              float* scores) {
  const int64_t hpg = a / g, kvl = g * d;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t j = 0; j < a; ++j) {
    const float* q = q_all + j * d;
    const int64_t kv = (j / hpg) * d;  // the head's group
    float mx = -INFINITY;
    for (int64_t t = 0; t <= pos; ++t) {
      float dot = 0;
      for (int64_t e = 0; e < d; ++e) dot += q[e] * k_cache[t * kvl + kv + e];
      scores[t] = dot * scale;
      mx = std::max(mx, scores[t]);
    }
    float sum = 0;
    for (int64_t t = 0; t <= pos; ++t) sum += (scores[t] = std::exp(scores[t] - mx));
    float* o = ctx + j * d;
    std::fill(o, o + d, 0.f);
    for (int64_t t = 0; t <= pos; ++t) {
      const float p = scores[t] / sum;
      for (int64_t e = 0; e < d; ++e) o[e] += p * v_cache[t * kvl + kv + e];
    }
  }
}

}  // namespace mt
