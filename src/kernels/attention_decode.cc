#include "kernels/attention_decode.h"

#include <algorithm>
#include <cmath>

namespace mt {

namespace {
// f(i, k rows, v rows, n): positions first + i .. first + i + n - 1 lie in n
// consecutive rows of one block (rows of g·d), in position order.
template <class F>
void for_each_run(const PagedKv& kv, int64_t first, int64_t last, F f) {
  const int64_t kvl = kv.g * kv.d;
  for (int64_t t = first; t <= last;) {
    const int64_t slot = t % kv.ring, in_block = slot % kv.block_size;
    const int64_t n = std::min(kv.block_size - in_block, last - t + 1);
    const int64_t row = int64_t(kv.table[slot / kv.block_size]) * kv.block_size + in_block;
    f(t - first, kv.k + row * kvl, kv.v + row * kvl, n);
    t += n;
  }
}
}  // namespace

void attention_decode_forward(float* ctx, float* scores, const float* q_all, int64_t a,
                              const PagedKv& kv, int64_t first, int64_t last) {
  const int64_t d = kv.d, hpg = a / kv.g, kvl = kv.g * d, span = last - first + 1;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t j = 0; j < a; ++j) {
    const float* q = q_all + j * d;
    const int64_t grp = (j / hpg) * d;  // the head's group
    float mx = -INFINITY;
    for_each_run(kv, first, last, [&](int64_t i0, const float* k, const float*, int64_t n) {
      for (int64_t t = 0; t < n; ++t) {
        float dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[e] * k[t * kvl + grp + e];
        scores[i0 + t] = dot * scale;
        mx = std::max(mx, scores[i0 + t]);
      }
    });
    float sum = 0;
    for (int64_t i = 0; i < span; ++i) sum += (scores[i] = std::exp(scores[i] - mx));
    float* o = ctx + j * d;
    std::fill(o, o + d, 0.f);
    for_each_run(kv, first, last, [&](int64_t i0, const float*, const float* v, int64_t n) {
      for (int64_t t = 0; t < n; ++t) {
        const float p = scores[i0 + t] / sum;
        for (int64_t e = 0; e < d; ++e) o[e] += p * v[t * kvl + grp + e];
      }
    });
  }
}

}  // namespace mt
