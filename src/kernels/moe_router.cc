// Router kernels: row-wise work (top-k, softmax, gradients) runs OpenMP over
// tokens, each row on its own; the two losses sum per-token terms in a fixed
// set of chunks (kChunks, whatever the thread count) and add the chunks in
// order, so every output has the same bits on any number of threads.
// Softmax and logsumexp are computed in double from max-subtracted logits: E
// is small (8 to 256), so the row costs nothing next to the router's GEMM.
#include "kernels/moe_router.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace mt {

namespace {

void check_shape(const char* who, int64_t n, int64_t E, int64_t k) {
  MT_CHECK(n >= 0 && E >= 1, who, ": bad shape n=", n, " E=", E,
           "; fix: pass the token count and a positive number of experts");
  MT_CHECK(k >= 1 && k <= E, who, ": k=", k, " choices per token with E=", E,
           " experts; fix: set the router's top-k to between 1 and the number of experts");
}

void check_seqs(const char* who, int64_t n, int64_t seqs) {
  MT_CHECK(seqs >= 1 && n % seqs == 0, who, ": n=", n, " tokens do not split into seqs=", seqs,
           " sequences; fix: pass seqs = 1 (whole batch) or the micro-batch size b of the "
           "(s, b) tokens");
}

// Every expert id in [0, E): a wrong id would write outside a row.
void check_expert_ids(const char* who, const int32_t* expert, int64_t n, int64_t k, int64_t E) {
  for (int64_t i = 0; i < n * k; ++i)
    MT_CHECK(expert[i] >= 0 && expert[i] < E, who, ": expert id ", expert[i], " at token ", i / k,
             " choice ", i % k, " is outside [0, ", E,
             "); fix: pass moe_topk_forward's expert array with the same n, k and E");
}

// logsumexp of a row of E logits, in double.
double row_lse(const float* z, int64_t E) {
  float mx = z[0];
  for (int64_t e = 1; e < E; ++e) mx = z[e] > mx ? z[e] : mx;
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += std::exp(double(z[e]) - mx);
  return mx + std::log(sum);
}

// The k largest of key(e), e in [0, E), into idx, largest first, equal
// values in index order: insertion into the sorted list held in idx itself.
// A later index goes after equal values, so ties keep the lower index first.
template <class Key>
void row_topk(int32_t* idx, const Key& key, int64_t E, int64_t k) {
  int64_t c = 0;  // entries in idx so far
  for (int64_t e = 0; e < E; ++e) {
    const float v = key(e);
    if (c == k && !(v > key(idx[k - 1]))) continue;
    int64_t p = c < k ? c : k - 1;  // the slot freed at the end
    while (p > 0 && v > key(idx[p - 1])) {
      idx[p] = idx[p - 1];
      --p;
    }
    idx[p] = int32_t(e);
    if (c < k) ++c;
  }
}

// Group-limited choice (Megatron's group_limited_topk): G groups of E/G
// experts, each scored by the sum of its top m = k/g keys (m passes, each
// taking the next key in (value desc, index asc) order); the best g groups
// (equal sums: the lower group) are kept and the k best keys among their
// experts chosen.
template <class Key>
void row_group_topk(int32_t* idx, const Key& key, int64_t E, int64_t k, int64_t G, int64_t g) {
  const int64_t per = E / G, m = k / g;
  float group_sum[kMoeMaxGroups];
  for (int64_t q = 0; q < G; ++q) {
    const int64_t e0 = q * per;
    float sum = 0;  // fp32, as torch sums the top-m values
    int64_t prev = -1;
    for (int64_t pass = 0; pass < m; ++pass) {
      int64_t best = -1;
      for (int64_t e = e0; e < e0 + per; ++e) {
        const bool after = prev < 0 || key(e) < key(prev) || (key(e) == key(prev) && e > prev);
        if (after && (best < 0 || key(e) > key(best))) best = e;
      }
      sum += key(best);
      prev = best;
    }
    group_sum[q] = sum;
  }
  int32_t groups[kMoeMaxGroups];
  row_topk(groups, [&](int64_t q) { return group_sum[q]; }, G, g);
  bool kept[kMoeMaxGroups] = {};
  for (int64_t j = 0; j < g; ++j) kept[groups[j]] = true;
  row_topk(idx, [&](int64_t e) { return kept[e / per] ? key(e) : -INFINITY; }, E, k);
}

float sigmoid(float z) { return float(1.0 / (1.0 + std::exp(-double(z)))); }

void check_routing(const char* who, const MoeRouting& r, int64_t E, int64_t k) {
  if (r.group_topk == 0) return;  // no group limit (num_groups alone means nothing, as there)
  MT_CHECK(r.num_groups >= 1 && r.num_groups <= kMoeMaxGroups && E % r.num_groups == 0, who,
           ": ", r.num_groups, " groups of E=", E, " experts; fix: pass a number of groups in [1, ",
           kMoeMaxGroups, "] that divides E");
  MT_CHECK(r.group_topk >= 1 && r.group_topk <= r.num_groups && r.group_topk <= k &&
               r.group_topk * (E / r.num_groups) >= k,
           who, ": group_topk=", r.group_topk, " of ", r.num_groups, " groups for k=", k,
           "; fix: choose between 1 and min(groups, k) groups that hold at least k experts");
}

// Σ_t term(t) for t in [0, n): kChunks fixed chunks summed in parallel, then
// added in chunk order, so the result does not depend on the thread count.
template <class Term>
double chunked_sum(int64_t n, const Term& term) {
  constexpr int kChunks = 64;
  double part[kChunks] = {};
  const int64_t len = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kChunks; ++c) {
    const int64_t t1 = std::min(n, (c + 1) * len);
    double s = 0;
    for (int64_t t = c * len; t < t1; ++t) s += term(t);
    part[c] = s;
  }
  double total = 0;
  for (double p : part) total += p;
  return total;
}

}  // namespace

// expert, prob (n, k) =; scores (n, E) =
void moe_topk_forward(int32_t* expert, float* prob, float* scores, const float* logits, int64_t n,
                      int64_t E, int64_t k, const MoeRouting& r) {
  check_shape("moe_topk_forward", n, E, k);
  check_routing("moe_topk_forward", r, E, k);
  const bool sigmoid_scores = r.score == MoeScoreFunction::kSigmoid;
  MT_CHECK(sigmoid_scores || r.bias == nullptr,
           "moe_topk_forward: an expert bias with softmax scores; fix: route with sigmoid scores");
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const float* z = logits + t * E;
    float* s = scores + t * E;
    int32_t* idx = expert + t * k;
    float* p = prob + t * k;
    if (sigmoid_scores) {
      for (int64_t e = 0; e < E; ++e) s[e] = sigmoid(z[e]);
    } else {
      const double lse = row_lse(z, E);
      for (int64_t e = 0; e < E; ++e) s[e] = float(std::exp(double(z[e]) - lse));
    }
    const float* key = sigmoid_scores || r.pre_softmax ? s : z;
    const auto choose = [&](const auto& key_of) {
      if (r.group_topk > 0)  // check_routing: num_groups then divides E
        row_group_topk(idx, key_of, E, k, r.num_groups, r.group_topk);
      else
        row_topk(idx, key_of, E, k);
    };
    if (r.bias != nullptr)
      choose([&](int64_t e) { return s[e] + r.bias[e]; });
    else
      choose([&](int64_t e) { return key[e]; });
    if (sigmoid_scores) {  // the chosen scores, normalised over the chosen (k > 1)
      double sum = 1e-20;
      for (int64_t j = 0; j < k; ++j) sum += s[idx[j]];
      for (int64_t j = 0; j < k; ++j)
        p[j] = float(r.scaling * (k > 1 ? s[idx[j]] / sum : double(s[idx[j]])));
    } else if (r.pre_softmax) {
      for (int64_t j = 0; j < k; ++j) p[j] = float(r.scaling * s[idx[j]]);
    } else {  // softmax over the chosen, from their max
      double top = z[idx[0]];
      for (int64_t j = 1; j < k; ++j) top = std::max(top, double(z[idx[j]]));
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += std::exp(double(z[idx[j]]) - top);
      for (int64_t j = 0; j < k; ++j)
        p[j] = float(r.scaling * std::exp(double(z[idx[j]]) - top) / sum);
    }
  }
}

void moe_topk_plain(int32_t* expert, const float* logits, int64_t n, int64_t E, int64_t k) {
  check_shape("moe_topk_plain", n, E, k);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const float* z = logits + t * E;
    row_topk(expert + t * k, [z](int64_t e) { return z[e]; }, E, k);
  }
}

void moe_router_round(float* x, int64_t n, MathMode math) {
  MT_CHECK(n >= 0 && (n == 0 || x != nullptr), "moe_router_round: n=", n, " x=", x,
           " (internal error)");
  if (math == MathMode::kF16) round_to_f16(x, x, n);
  if (math != MathMode::kBF16) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = f32_from_bf16(bf16_from_f32(x[i]));
}

int64_t moe_expert_capacity(int64_t n, int64_t E, int64_t k, double capacity_factor) {
  check_shape("moe_expert_capacity", n, E, k);
  MT_CHECK(capacity_factor > 0, "moe_expert_capacity: capacity_factor=", capacity_factor,
           "; fix: pass a positive --moe-expert-capacity-factor, or no capacity at all");
  return int64_t(std::ceil(double(n * k) / double(E) * capacity_factor));
}

// kept (n, k) =
int64_t moe_apply_capacity(uint8_t* kept, const int32_t* expert, const float* prob, int64_t n,
                           int64_t E, int64_t k, int64_t capacity, bool drop_by_position,
                           int64_t* scratch) {
  check_shape("moe_apply_capacity", n, E, k);
  check_expert_ids("moe_apply_capacity", expert, n, k, E);
  const int64_t nk = n * k;
  if (capacity < 0) {
    std::fill(kept, kept + nk, uint8_t(1));
    return 0;
  }
  // Bucket the (token, choice) pairs by expert, each bucket in token order
  // (a counting sort): pairs[start[e] .. start[e + 1]) are expert e's.
  std::vector<int64_t> own;
  if (scratch == nullptr) {
    own.resize(size_t(moe_capacity_scratch(n, E, k)));
    scratch = own.data();
  }
  int64_t* start = scratch;          // (E + 1)
  int64_t* next = start + E + 1;     // (E)
  int64_t* pairs = next + E;         // (n·k)
  std::fill(start, start + E + 1, int64_t(0));
  for (int64_t i = 0; i < nk; ++i) ++start[expert[i] + 1];
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  std::copy(start, start + E, next);
  for (int64_t i = 0; i < nk; ++i) pairs[next[expert[i]]++] = i;
  std::fill(kept, kept + nk, uint8_t(0));
  int64_t dropped = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : dropped)
  for (int64_t e = 0; e < E; ++e) {
    int64_t* first = pairs + start[e];
    const int64_t m = start[e + 1] - start[e];
    const int64_t keep = std::min(m, capacity);
    // "probs": the `keep` best by (prob desc, token asc), a strict order, so
    // the kept set is unique; a pair's index i = t·k + j orders by token. A
    // NaN prob ranks as -inf (an order nth_element can rely on).
    const auto key = [&](int64_t i) { return std::isnan(prob[i]) ? -INFINITY : prob[i]; };
    if (!drop_by_position && keep < m)
      std::nth_element(first, first + keep, first + m, [&](int64_t a, int64_t b) {
        return key(a) > key(b) || (key(a) == key(b) && a < b);
      });
    for (int64_t i = 0; i < keep; ++i) kept[first[i]] = 1;
    dropped += m - keep;
  }
  return dropped;
}

// dlogits (n, E) =
void moe_topk_backward(float* dlogits, const float* dprob, const int32_t* expert, const float* prob,
                       const float* scores, int64_t n, int64_t E, int64_t k, const MoeRouting& r) {
  check_shape("moe_topk_backward", n, E, k);
  check_expert_ids("moe_topk_backward", expert, n, k, E);
  const double f = r.scaling;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    float* g = dlogits + t * E;
    const float* dp = dprob + t * k;
    const int32_t* idx = expert + t * k;
    const float* s = scores + t * E;
    if (r.score == MoeScoreFunction::kSigmoid) {
      std::fill(g, g + E, 0.f);
      double sum = 1e-20, dot = 0;  // S and Σ_i dp_i u_i
      for (int64_t j = 0; j < k; ++j) {
        sum += s[idx[j]];
        dot += double(dp[j]) * s[idx[j]];
      }
      for (int64_t j = 0; j < k; ++j) {
        const double u = s[idx[j]];
        const double du = k > 1 ? f * (dp[j] - dot / sum) / sum : f * dp[j];
        g[idx[j]] = float(du * u * (1 - u));
      }
    } else if (r.pre_softmax) {  // ds is f·dp on the chosen, 0 elsewhere
      double dot = 0;  // <ds, scores>
      for (int64_t j = 0; j < k; ++j) dot += f * dp[j] * s[idx[j]];
      for (int64_t e = 0; e < E; ++e) g[e] = float(-double(s[e]) * dot);
      for (int64_t j = 0; j < k; ++j) g[idx[j]] = float(double(s[idx[j]]) * (f * dp[j] - dot));
    } else {
      const float* p = prob + t * k;
      double dot = 0;  // Σ_i p_i dp_i / f
      for (int64_t j = 0; j < k; ++j) dot += double(p[j]) * dp[j];
      dot /= f;
      std::fill(g, g + E, 0.f);
      for (int64_t j = 0; j < k; ++j) g[idx[j]] = float(double(p[j]) * (dp[j] - dot));
    }
  }
}

// counts (seqs, E) =
void moe_expert_counts(double* counts, const int32_t* expert, int64_t n, int64_t k, int64_t E,
                       int64_t seqs) {
  check_shape("moe_expert_counts", n, E, k);
  check_seqs("moe_expert_counts", n, seqs);
  check_expert_ids("moe_expert_counts", expert, n, k, E);
  std::fill(counts, counts + seqs * E, 0.0);
  // n·k increments: serial (integers in double, so exact in any order anyway).
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) counts[(t % seqs) * E + expert[t * k + j]] += 1.0;
}

namespace {

// The aux loss's per-token view of the scores: softmax as given; sigmoid
// normalised over all E (Megatron's compute_routing_scores_for_aux_loss):
// inv = 1 / (Σ_e u_e + 1e-20), so q = u · inv.
double aux_inv(const float* s, int64_t E, MoeScoreFunction fn) {
  if (fn == MoeScoreFunction::kSoftmax) return 1;
  double sum = 1e-20;
  for (int64_t e = 0; e < E; ++e) sum += s[e];
  return 1 / sum;
}

}  // namespace

double moe_aux_loss(const float* scores, const double* counts, int64_t n, int64_t E, int64_t seqs,
                    double scale, MoeScoreFunction fn) {
  check_shape("moe_aux_loss", n, E, 1);
  check_seqs("moe_aux_loss", n, seqs);
  return scale * chunked_sum(n, [&](int64_t t) {
           const float* s = scores + t * E;
           const double* c = counts + (t % seqs) * E;
           double sum = 0;
           for (int64_t e = 0; e < E; ++e) sum += double(s[e]) * c[e];
           return sum * aux_inv(s, E, fn);
         });
}

// dlogits (n, E) +=
void moe_aux_loss_backward(float* dlogits, const float* scores, const double* counts, int64_t n,
                           int64_t E, int64_t seqs, double scale, MoeScoreFunction fn) {
  check_shape("moe_aux_loss_backward", n, E, 1);
  check_seqs("moe_aux_loss_backward", n, seqs);
  const bool sigmoid_scores = fn == MoeScoreFunction::kSigmoid;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const float* s = scores + t * E;
    const double* c = counts + (t % seqs) * E;
    float* g = dlogits + t * E;
    const double inv = aux_inv(s, E, fn);
    double dot = 0;  // <q, c>
    for (int64_t e = 0; e < E; ++e) dot += double(s[e]) * inv * c[e];
    for (int64_t e = 0; e < E; ++e) {
      const double u = s[e];  // dq/dz: softmax u(δ - u); sigmoid via u(1 - u) / S
      g[e] += float(sigmoid_scores ? scale * u * (1 - u) * (c[e] - dot) * inv
                                   : scale * u * (c[e] - dot));
    }
  }
}

double moe_z_loss(const float* logits, int64_t n, int64_t E, double scale) {
  check_shape("moe_z_loss", n, E, 1);
  return scale * chunked_sum(n, [&](int64_t t) {
           const double lse = row_lse(logits + t * E, E);
           return lse * lse;
         });
}

// dlogits (n, E) +=
void moe_z_loss_backward(float* dlogits, const float* logits, int64_t n, int64_t E, double scale) {
  check_shape("moe_z_loss_backward", n, E, 1);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    const float* z = logits + t * E;
    float* g = dlogits + t * E;
    const double lse = row_lse(z, E);
    for (int64_t e = 0; e < E; ++e) g[e] += float(2 * scale * lse * std::exp(double(z[e]) - lse));
  }
}

void moe_expert_bias_update(float* bias, const double* tokens, int64_t E, float rate) {
  check_shape("moe_expert_bias_update", 0, E, 1);
  double total = 0;
  for (int64_t e = 0; e < E; ++e) total += tokens[e];
  const double mean = total / double(E);
  for (int64_t e = 0; e < E; ++e) {
    const double offset = mean - tokens[e];
    bias[e] += float(offset > 0 ? rate : offset < 0 ? -rate : 0.f);
  }
}

}  // namespace mt
