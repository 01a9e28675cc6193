#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace mt {

int32_t sample_token(const float* logits, int64_t vocab_size, const SamplingConfig& cfg,
                     const RngStream& rng, uint64_t draw, std::vector<float>& scratch) {
  MT_CHECK(cfg.temperature >= 0, "--temperature ", cfg.temperature, " must be >= 0");
  MT_CHECK(cfg.top_p >= 0 && cfg.top_p <= 1, "--top-p ", cfg.top_p, " must be in [0, 1]");
  MT_CHECK(cfg.top_k >= 0, "--top-k ", cfg.top_k, " must be >= 0");
  if (cfg.temperature == 0)
    return int32_t(std::max_element(logits, logits + vocab_size) - logits);
  // Candidates sorted by logit, cut to top-k.
  std::vector<int32_t> ids(static_cast<size_t>(vocab_size));
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) { return logits[x] > logits[y]; });
  int64_t n = vocab_size;
  if (cfg.top_k > 0) n = std::min(n, cfg.top_k);
  scratch.resize(size_t(n));
  const float mx = logits[ids[0]];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += scratch[size_t(i)] = std::exp((logits[ids[size_t(i)]] - mx) / cfg.temperature);
  if (cfg.top_p > 0 && cfg.top_p < 1) {  // smallest prefix with mass >= top_p
    double acc = 0;
    int64_t keep = 0;
    while (keep < n && acc < cfg.top_p * sum) acc += scratch[size_t(keep++)];
    n = std::max<int64_t>(keep, 1);
    sum = acc;
  }
  double u = double(rng.uniform(draw)) * sum;
  for (int64_t i = 0; i < n; ++i) {
    u -= scratch[size_t(i)];
    if (u < 0) return ids[size_t(i)];
  }
  return ids[size_t(n - 1)];
}

namespace {
double log_sum_exp(const float* logits, int64_t vocab_size) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < vocab_size; ++j) mx = std::max(mx, double(logits[j]));
  double sum = 0;
  for (int64_t j = 0; j < vocab_size; ++j) sum += std::exp(double(logits[j]) - mx);
  return mx + std::log(sum);
}
}  // namespace

double log_prob(const float* logits, int64_t vocab_size, int32_t token) {
  return double(logits[token]) - log_sum_exp(logits, vocab_size);
}

std::vector<std::pair<int32_t, double>> top_log_probs(const float* logits, int64_t vocab_size,
                                                      int64_t n) {
  n = std::min(n, vocab_size);
  std::vector<int32_t> ids(static_cast<size_t>(vocab_size));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t x, int32_t y) {
    return logits[x] > logits[y] || (logits[x] == logits[y] && x < y);
  });
  const double lse = log_sum_exp(logits, vocab_size);
  std::vector<std::pair<int32_t, double>> top;
  for (int64_t i = 0; i < n; ++i) top.emplace_back(ids[size_t(i)], double(logits[ids[size_t(i)]]) - lse);
  return top;
}

}  // namespace mt
