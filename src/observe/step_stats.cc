#include "observe/step_stats.h"

#include <cmath>

#include "backend/device.h"
#include "core/error.h"
#include "kernels/reduce.h"

namespace mt {

namespace {

double zeros(const FloatRange* ranges, size_t count) {
  int64_t z = 0;
  for (size_t r = 0; r < count; ++r) {
    const float* x = ranges[r].x;
    MT_CHECK(!on_device(x), "--log-num-zeros-in-grad counts on the host; not built for --device "
             "cuda yet; fix: leave out --log-num-zeros-in-grad on GPU runs");
    for (int64_t i = 0; i < ranges[r].n; ++i) z += x[i] == 0.0f;
  }
  return double(z);
}

Communicator* model_parallel(ParallelState& ps) {
  return ps.mp_comm.size() > 1 ? &ps.mp_comm : nullptr;
}

}  // namespace

double params_l2_norm(const AdamWOptimizer& opt, const GradSync& sync, ParallelState& ps) {
  const bool main = opt.has_main_params();
  const float* weights = main ? opt.main_params() : sync.step_params();
  MT_CHECK(weights != nullptr, "--log-params-norm: no fp32 weights to read on this rank");
  return std::sqrt(opt.global_sum(weights, main, sum_squares, model_parallel(ps), &ps.emp_comm));
}

int64_t num_zeros_in_grad(const AdamWOptimizer& opt, const GradSync& sync, ParallelState& ps) {
  return int64_t(std::llround(opt.global_sum(sync.optimizer_grads(), opt.packed_grads(), zeros,
                                             model_parallel(ps), &ps.emp_comm)));
}

}  // namespace mt
