// The token dispatcher of the MoE block (Megatron core's
// MoEAllGatherTokenDispatcher / MoEAlltoAllTokenDispatcher): brings every
// kept (token, choice) pair of the EP group's ranks to the rank that holds
// its expert, and the experts' outputs back.
//
// Expert side, both dispatchers build the same rows: for each local expert in
// order, the pairs routed to it from EP rank 0, 1, ... and from each rank in
// (token, choice) order; each expert's rows are padded with zero rows to a
// size from a short list (moe_padded_rows), so the GEMMs see few distinct
// shapes (their primitives are cached per shape). Padding rows have gate 0
// and zero gradients, so they change nothing.
//
// - all-to-all: the per-expert counts of every rank are summed over EP first
//   (one small all-reduce), then each rank sends its pairs' rows to their
//   experts' ranks (all_to_all_v) and gets the outputs back the same way.
// - all-gather: the tokens and their routing are all-gathered over EP, each
//   rank picks its experts' pairs, and the weighted outputs come back with a
//   reduce-scatter (sums of several ranks' parts: equal to the all-to-all's
//   up to float rounding).
// With EP = 1 both are a local permutation.
#pragma once
#include <cstdint>

#include "model/blocks/moe_block.h"

namespace mt {

// Rows an expert that receives m pairs is given (m rounded up to a multiple
// of max(8, 2^⌊log2 m⌋ / 8): at most 1/8 more, ~8 sizes per octave).
int64_t moe_padded_rows(int64_t m);
// The same for this layer: with --moe-pad-expert-input-to-capacity every
// expert gets EP x capacity rows (Megatron pads each expert's input to its
// capacity; the padding has gate 0 and changes no number).
int64_t expert_padded_rows(const GptShapes& sh, int64_t m);

// Forward: rec.perm, counts_all, src / inv / pair, meta, and the expert rows
// rec.xin and rec.gate_rows, from rec.in, rec.expert, rec.kept, rec.gate.
void moe_dispatch_forward(MoeRecord& rec, MoeWorkspace& ws, const GptShapes& sh);
// out (n, h) = Σ over each of this rank's tokens' pairs of its expert rows
// (fp32, expert side) sent back: the combine (rows = gate · y) and the
// dispatch's backward (rows = the experts' input gradients).
void moe_rows_to_tokens(float* out, const float* rows, const MoeRecord& rec, MoeWorkspace& ws,
                        const GptShapes& sh);
// rows (expert side, fp32) = each row's token's row of x (n, h): the
// combine's backward (x = the gradient of the block's output).
void moe_tokens_to_rows(float* rows, const float* x, const MoeRecord& rec, MoeWorkspace& ws,
                        const GptShapes& sh);
// dgate (n, k) = the expert rows' gate gradients `drow` sent back to their
// pairs (0 for dropped pairs).
void moe_gate_grad_back(float* dgate, const float* drow, const MoeRecord& rec, MoeWorkspace& ws,
                        const GptShapes& sh);

// The rows of local expert i: [begin, begin + count) of the expert side,
// padded up to the next expert's begin. From rec.counts_all.
struct ExpertRows {
  int64_t begin = 0, count = 0, padded = 0;  // padded: count with its padding rows
};
ExpertRows expert_rows(const MoeRecord& rec, const GptShapes& sh, int64_t i);

}  // namespace mt
