// The experts of the MoE block (Megatron core's SequentialMLP / GroupedMLP):
// each local expert's MLP (fc1, the activation, fc2) over its rows of the
// dispatched tokens (moe_dispatch.h's expert side), one GEMM per expert and
// linear, or with --moe-grouped-gemm one batched GEMM per linear.
#pragma once
#include "model/blocks/moe_block.h"

namespace mt {

// The expert MLPs over the expert rows: fc1, activation (into `act`, the
// record's or the workspace's), fc2 (unweighted y).
void experts_forward(MoeRecord& rec, WriteView act, const MoeParams<ReadView>& w,
                     const GptShapes& sh);

// dxin (expert rows, h) = from dy; expert weight gradients +=. With moe_act
// (MoeRecord::recompute_act) the activation output is redone from the kept
// fc1 into the workspace first (Megatron's CheckpointWithoutOutput).
void experts_backward(float* dxin, const MoeParams<float*>& g, const float* dy,
                      const MoeRecord& rec, MoeWorkspace& ws, const MoeParams<ReadView>& w,
                      const GptShapes& sh);

}  // namespace mt
