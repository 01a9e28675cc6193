// Megatron's --log-params-norm (calc_params_l2_norm) and
// --log-num-zeros-in-grad (the optimizer's count_zeros): over every
// parameter element once, whatever the layout (TP-replicated and tied ones
// counted once; sharded optimizer pieces summed over DP), so a one-rank run
// and any layout log the same values. Collective over the model- and
// data-parallel groups, as the grad norm.
#pragma once
#include <cstdint>

#include "comm/parallel_state.h"
#include "optim/grad_sync.h"
#include "optim/optimizer.h"

namespace mt {

// The L2 norm of the weights after the step (the fp32 main weights where
// the optimizer keeps them).
double params_l2_norm(const AdamWOptimizer& opt, const GradSync& sync, ParallelState& ps);
// The gradient elements equal to zero in this step (DP-reduced, before clipping).
int64_t num_zeros_in_grad(const AdamWOptimizer& opt, const GradSync& sync, ParallelState& ps);

}  // namespace mt
