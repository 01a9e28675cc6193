// The router math of a mixture-of-experts layer (Megatron core's
// moe_utils.py: topk_softmax_with_capacity, get_capacity,
// switch_load_balancing_loss_func, sequence_load_balancing_loss_func,
// z_loss_func), on the router's logits. The router's linear layer, the token
// dispatch and the experts live elsewhere; these kernels turn logits into
// choices, their weights and the two auxiliary losses, and back.
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

// expert (n, k) = the k largest logits' experts of each token, largest first
//   (equal logits: the lower expert index first)                        [=]
// scores (n, E) = softmax of each token's E logits                      [=]
// prob (n, k)   = pre_softmax false (Megatron's default): softmax over the k
//   chosen logits (they sum to 1); pre_softmax true: scores[t, expert[t, j]]
//   (no renormalisation)                                                 [=]
void moe_topk_forward(int32_t* expert, float* prob, float* scores, const float* logits, int64_t n,
                      int64_t E, int64_t k, bool pre_softmax);

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
//   default:     the softmax over the chosen: on the k chosen entries
//                p_j (dprob_j - Σ_i p_i dprob_i), 0 on the others
//   pre_softmax: ds = dprob scattered to the chosen experts (0 elsewhere),
//                dlogits = scores ⊙ (ds - <ds, scores>)
// prob and scores are moe_topk_forward's outputs for the same mode.
void moe_topk_backward(float* dlogits, const float* dprob, const int32_t* expert, const float* prob,
                       const float* scores, int64_t n, int64_t E, int64_t k, bool pre_softmax);

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
// scores are moe_topk_forward's (always softmax over all E, also in the
// pre_softmax mode). n must be a multiple of seqs.
double moe_aux_loss(const float* scores, const double* counts, int64_t n, int64_t E, int64_t seqs,
                    double scale);
// dlogits (n, E) += the gradient of moe_aux_loss with respect to the logits
// (scores = softmax(logits), counts constant):
//   scale · scores ⊙ (c - <scores, c>), c = counts[t % seqs]              [+=]
void moe_aux_loss_backward(float* dlogits, const float* scores, const double* counts, int64_t n,
                           int64_t E, int64_t seqs, double scale);

// The router z-loss: returns scale · Σ_t logsumexp(logits_t)². Megatron's
// z_loss_func is the mean over the group's tokens: scale = coeff / (n·tp·cp),
// coeff = --moe-z-loss-coeff.
double moe_z_loss(const float* logits, int64_t n, int64_t E, double scale);
// dlogits (n, E) += 2 · scale · logsumexp(logits_t) · softmax(logits_t)   [+=]
void moe_z_loss_backward(float* dlogits, const float* logits, int64_t n, int64_t E, double scale);

}  // namespace mt
