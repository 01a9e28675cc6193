// AdamW with fp32 main weights over the parameter list, and global-norm
// gradient clipping. Moments live in flat buffers laid out exactly like the
// parameter buffer (same offsets), so checkpoint names and (later) ZeRO shards
// come from the same ParamRegistry.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "dist/communicator.h"
#include "kernels/adamw.h"
#include "model/params.h"

namespace mt {

struct OptimizerConfig {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.01f;
  float clip_grad = 1.0f;  // 0 → no clipping
};

class AdamWOptimizer {
 public:
  AdamWOptimizer(const ParamRegistry& reg, const OptimizerConfig& cfg);

  // Global L2 norm of the gradients, each parameter counted once across the
  // model-parallel group (TP-replicated ones on tp_rank 0 only; the last
  // stage's copy of the tied embedding not at all). `mp` may be null (1 rank).
  double grad_norm(const float* grads, Communicator* mp) const;
  // Scales grads by clip/(norm + 1e-6) when that is < 1 (Megatron, torch).
  void clip(float* grads, double norm) const;
  // One AdamW step with learning rate lr; advances the step count.
  void step(float* params, const float* grads, double lr);

  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  float* exp_avg() const { return m_; }
  float* exp_avg_sq() const { return v_; }
  int64_t floats() const { return reg_.total_floats(); }
  size_t state_bytes() const { return buffer_.size(); }
  const OptimizerConfig& config() const { return cfg_; }

 private:
  const ParamRegistry& reg_;
  OptimizerConfig cfg_;
  HostBuffer buffer_;
  float* m_ = nullptr;
  float* v_ = nullptr;
  int64_t steps_ = 0;
};

}  // namespace mt
