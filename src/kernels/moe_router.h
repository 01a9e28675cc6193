// The router math of a mixture-of-experts layer (Megatron core's
// moe_utils.py: topk_routing_with_score_function, group_limited_topk,
// get_updated_expert_bias, get_capacity,
// switch_load_balancing_loss_func, sequence_load_balancing_loss_func,
// z_loss_func), on the router's logits. The router's linear layer, the token
// dispatch and the experts live elsewhere; these kernels turn logits into
// choices, their weights and the two auxiliary losses, and back; and the
// expert bias's update from the experts' loads.
//
// Shapes: n tokens, E experts, k choices per token. Tokens are sequence-first
// (row t = s·b + i for position s of sequence i), as Megatron's (s, b, h)
// activations flattened, so token t belongs to sequence t % b.
//   logits, scores, dlogits: (n, E) row-major fp32
//   expert, prob, dprob, kept: (n, k)
//   counts: (seqs, E)
// All values fp32; sums over tokens in double, in a fixed order, so results do
// not depend on the OpenMP thread count.
#pragma once
#include <cstdint>

#include "kernels/precision.h"

namespace mt {

// How the router turns logits into scores, choices and weights (Megatron's
// topk_routing_with_score_function arguments; DeepSeek-V3 routes with
// sigmoid scores, group-limited choices and an expert bias).
enum class MoeScoreFunction { kSoftmax, kSigmoid };
struct MoeRouting {
  MoeScoreFunction score = MoeScoreFunction::kSoftmax;  // --moe-router-score-function
  bool pre_softmax = false;    // softmax only: --moe-router-pre-softmax
  int64_t num_groups = 0;      // --moe-router-num-groups: E/G experts a group (0: no groups)
  int64_t group_topk = 0;      // --moe-router-group-topk: groups a token chooses from
  double scaling = 1;          // --moe-router-topk-scaling-factor (1: Megatron's None)
  const float* bias = nullptr;  // (E) sigmoid only: the expert bias, added to choose only
};
// The most groups the kernels take (they keep a row's group scores on the stack).
constexpr int64_t kMoeMaxGroups = 64;

// expert (n, k) = each token's k chosen experts, best first (equal keys: the
//   lower expert index first)                                            [=]
//   key: softmax: the logits (pre_softmax: the scores, as Megatron ranks
//   them); sigmoid: the scores plus the bias, if any. With groups (num_groups G,
//   group_topk g): each group ranked by the sum of its top k/g keys, the
//   best g groups kept (equal sums: the lower group), the k best keys of
//   their experts chosen (Megatron's group_limited_topk).
// scores (n, E) = softmax: the softmax of each token's E logits; sigmoid:
//   sigmoid of each logit                                                [=]
// prob (n, k)   = scaling times: softmax, pre_softmax false (Megatron's
//   default): the softmax over the k chosen logits; pre_softmax true:
//   scores[t, expert[t, j]]; sigmoid: the chosen scores over their sum
//   (+1e-20), for k > 1, else the score itself (the bias never weighs) [=]
void moe_topk_forward(int32_t* expert, float* prob, float* scores, const float* logits, int64_t n,
                      int64_t E, int64_t k, const MoeRouting& routing);
inline void moe_topk_forward(int32_t* expert, float* prob, float* scores, const float* logits,
                             int64_t n, int64_t E, int64_t k, bool pre_softmax) {
  MoeRouting r;
  r.pre_softmax = pre_softmax;
  moe_topk_forward(expert, prob, scores, logits, n, E, k, r);
}

// expert (n, k) = the k largest logits' experts of each token, largest first
// (equal: the lower index first), whatever the groups and bias: the choices
// Megatron's load-balancing losses count (compute_routing_scores_for_aux_loss
// takes the top-k of the scores alone, a monotone function of the logits). [=]
void moe_topk_plain(int32_t* expert, const float* logits, int64_t n, int64_t E, int64_t k);

// x (n) = each value rounded to the router's dtype `math`, kept in fp32
// storage (kBF16: nearest bf16, kF16: nearest fp16; kF32: unchanged)     [=]
// Megatron's router without --moe-router-dtype holds its logits and its
// probabilities in the run's dtype (router.py gating: the GEMM's output in
// the input's dtype; moe_utils.py: probs.type_as(logits)); with
// --moe-router-dtype fp32 both stay fp32.
void moe_router_round(float* x, int64_t n, MathMode math);

// Expert capacity, Megatron's get_capacity(num_tokens = n·k):
// ceil(n·k / E · capacity_factor).
int64_t moe_expert_capacity(int64_t n, int64_t E, int64_t k, double capacity_factor);

// kept (n, k) = 1 where the choice survives, 0 where it is dropped       [=]
// Each expert keeps at most `capacity` of the (token, choice) pairs routed to
// it: drop_by_position false (Megatron's "probs" policy) keeps the highest
// prob (equal probs: the lower token first); true ("position") keeps the
// first in token order. capacity < 0: no capacity, all kept. Returns the
// number of pairs dropped. Uses O(n·k + E) scratch memory of its own.
// scratch: moe_capacity_scratch(n, E, k) int64s, reused by the caller (null:
// allocated here, for tests).
int64_t moe_apply_capacity(uint8_t* kept, const int32_t* expert, const float* prob, int64_t n,
                           int64_t E, int64_t k, int64_t capacity, bool drop_by_position,
                           int64_t* scratch = nullptr);
inline int64_t moe_capacity_scratch(int64_t n, int64_t E, int64_t k) { return 2 * E + 1 + n * k; }

// dlogits (n, E) = d(loss)/d(logits) through prob alone, given dprob (n, k)
// (the caller zeroes dprob where a choice was dropped)                  [=]
//   softmax:     the softmax over the chosen: on the k chosen entries
//                p_j (dprob_j - Σ_i p_i dprob_i / scaling), 0 on the others
//   pre_softmax: ds = scaling · dprob scattered to the chosen experts (0
//                elsewhere), dlogits = scores ⊙ (ds - <ds, scores>)
//   sigmoid:     u = the chosen scores, S = Σ u + 1e-20 (k > 1): on the
//                chosen, scaling · (dprob_j - Σ_i dprob_i u_i / S) / S ·
//                u_j (1 - u_j) (k = 1: scaling · dprob · u (1 - u)); 0 on the others
// prob and scores are moe_topk_forward's outputs for the same routing (the
// choice itself is piecewise constant: groups and bias add no gradient).
void moe_topk_backward(float* dlogits, const float* dprob, const int32_t* expert, const float* prob,
                       const float* scores, int64_t n, int64_t E, int64_t k,
                       const MoeRouting& routing);
inline void moe_topk_backward(float* dlogits, const float* dprob, const int32_t* expert,
                              const float* prob, const float* scores, int64_t n, int64_t E,
                              int64_t k, bool pre_softmax) {
  MoeRouting r;
  r.pre_softmax = pre_softmax;
  moe_topk_backward(dlogits, dprob, expert, prob, scores, n, E, k, r);
}

// counts (seqs, E) = the number of choices routed to each expert, per
// sequence (token t counts in row t % seqs), before capacity dropping, as
// Megatron counts them for the load-balancing loss. seqs = 1: the whole
// batch's counts. n must be a multiple of seqs.                        [=]
void moe_expert_counts(double* counts, const int32_t* expert, int64_t n, int64_t k, int64_t E,
                       int64_t seqs);

// The load-balancing loss, both Megatron variants in one form:
//   returns scale · Σ_t Σ_e scores[t, e] · counts[t % seqs, e]
// How a caller picks the arguments (coeff = --moe-aux-loss-coeff, counts from
// moe_expert_counts, then summed over the tensor×context-parallel group by the
// caller, as Megatron all-reduces tokens_per_expert over that group):
//   aux_loss (switch):  seqs = 1, scale = E·coeff / (k·T²), T = the tokens of
//                       the whole group (n · tp · cp when each rank holds n)
//   seq_aux_loss:       seqs = b (micro-batch size), scale = E·coeff / (k·S²·b),
//                       S = the full sequence length (over all cp ranks)
// scores are moe_topk_forward's: softmax (in both modes) enters as it is;
// sigmoid as Megatron's aux scores, normalised over all E:
// q = scores / (Σ_e scores + 1e-20). n must be a multiple of seqs.
double moe_aux_loss(const float* scores, const double* counts, int64_t n, int64_t E, int64_t seqs,
                    double scale, MoeScoreFunction fn = MoeScoreFunction::kSoftmax);
// dlogits (n, E) += the gradient of moe_aux_loss with respect to the logits
// (counts constant), c = counts[t % seqs]:                                [+=]
//   softmax: scale · scores ⊙ (c - <scores, c>)
//   sigmoid: scale · u (1 - u) ⊙ (c - <q, c>) / (Σ u + 1e-20), u = scores
void moe_aux_loss_backward(float* dlogits, const float* scores, const double* counts, int64_t n,
                           int64_t E, int64_t seqs, double scale,
                           MoeScoreFunction fn = MoeScoreFunction::kSoftmax);

// The router z-loss: returns scale · Σ_t logsumexp(logits_t)². Megatron's
// z_loss_func is the mean over the group's tokens: scale = coeff / (n·tp·cp),
// coeff = --moe-z-loss-coeff.
double moe_z_loss(const float* logits, int64_t n, int64_t E, double scale);
// dlogits (n, E) += 2 · scale · logsumexp(logits_t) · softmax(logits_t)   [+=]
void moe_z_loss_backward(float* dlogits, const float* logits, int64_t n, int64_t E, double scale);

// bias (E) += rate · sign(mean(tokens) - tokens_e): the aux-loss-free
// balancing step (Megatron's get_updated_expert_bias), tokens (E) = each
// expert's routed (token, choice) pairs of the step, summed over the ranks
// that share the router (TP x CP x DP). sign(0) = 0.                    [+=]
void moe_expert_bias_update(float* bias, const double* tokens, int64_t E, float rate);

}  // namespace mt
