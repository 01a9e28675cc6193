#include "optim/optimizer.h"

#include <cmath>

#include "kernels/reduce.h"

namespace mt {

AdamWOptimizer::AdamWOptimizer(const ParamRegistry& reg, const OptimizerConfig& cfg)
    : reg_(reg), cfg_(cfg), buffer_(size_t(2 * reg.total_floats()) * sizeof(float)) {
  m_ = reinterpret_cast<float*>(buffer_.data());
  v_ = m_ + reg.total_floats();
}

double AdamWOptimizer::grad_norm(const float* grads, Communicator* mp) const {
  const StageLayout& st = reg_.stage();
  double sq = 0;
  for (const ParamSpec& p : reg_.params()) {
    if (p.tp_replicated() && st.tp_rank != 0) continue;
    if (p.name == "embedding.word_embeddings.weight" && !st.has_embedding) continue;
    sq += sum_squares(grads + p.offset, p.numel());
  }
  if (mp != nullptr) mp->all_reduce_sum(&sq, 1);
  return std::sqrt(sq);
}

void AdamWOptimizer::clip(float* grads, double norm) const {
  if (cfg_.clip_grad <= 0) return;
  const double coeff = double(cfg_.clip_grad) / (norm + 1e-6);
  if (coeff >= 1.0) return;
  for (const ParamSpec& p : reg_.params()) scale_inplace(grads + p.offset, p.numel(), float(coeff));
}

void AdamWOptimizer::step(float* params, const float* grads, double lr) {
  ++steps_;
  for (const ParamSpec& p : reg_.params()) {
    AdamWHyper h;
    h.lr = float(lr);
    h.beta1 = cfg_.beta1;
    h.beta2 = cfg_.beta2;
    h.eps = cfg_.eps;
    h.weight_decay = p.weight_decay ? cfg_.weight_decay : 0.f;
    adamw_step(params + p.offset, grads + p.offset, m_ + p.offset, v_ + p.offset, p.numel(), h,
               steps_);
  }
}

}  // namespace mt
