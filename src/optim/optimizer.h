// AdamW with fp32 main weights over the parameter list, global-norm gradient
// clipping, and Megatron's distributed optimizer (ZeRO-1) — one code path.
//
// The optimizer owns a set of ranges of the flat parameter / gradient
// buffers: the whole buffer (the plain optimizer), or with
// --use-distributed-optimizer this DP rank's piece of every DP bucket
// (optim/grad_buckets.h: the buckets' reduce-scatter leaves the DP-averaged
// gradients there, and the all-gather of optim/param_gather.h spreads the
// updated values afterwards). It keeps Adam's moments (fp32 m and v) for its
// ranges only, packed in range order: 8 bytes per parameter, or about 8/DP
// when sharded. With the single whole-buffer range the moments are laid out
// exactly like the parameter buffer (same offsets).
//
// A range may cut through a parameter, so all work runs per segment: the
// intersection of one parameter with one range (alignment gaps between
// parameters belong to no segment), with that parameter's weight-decay flag
// and grad-norm rule. A step updates only the owned segments.
//
// Main weights (Megatron's mixed precision): in fp32 runs the model's fp32
// weights are the main weights and the step updates them in place. In bf16
// runs (main_weights) the model holds bf16 weights only; the optimizer keeps
// the fp32 main weights of its ranges, packed like m and v (4 bytes per
// parameter, 4/DP sharded), and each step writes their bf16 rounding into the
// model's buffer. Optimizer state is then 12 bytes per owned parameter:
// with the model's 2 (bf16) and the gradients' 4, Megatron's 18, or
// 6 + 12/DP with the distributed optimizer.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/device.h"
#include "core/arena.h"
#include "comm/communicator.h"
#include "kernels/adamw.h"
#include "kernels/reduce.h"
#include "model/params.h"
#include "optim/grad_buckets.h"
#include "optim/param_scheduler.h"

namespace mt {

// Megatron's --optimizer: adam (AdamW) or sgd (torch.optim.SGD with
// --sgd-momentum; its momentum buffer is kept in exp_avg(), exp_avg_sq()
// stays zero).
enum class OptimizerKind { kAdam, kSgd };

struct OptimizerConfig {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.01f;
  float clip_grad = 1.0f;  // 0 → no clipping
  OptimizerKind kind = OptimizerKind::kAdam;
  float sgd_momentum = 0.9f;
};

// The part of one parameter that one optimizer range covers.
struct OptimSegment {
  size_t param = 0;           // index into ParamRegistry::params()
  int64_t begin = 0, end = 0;  // floats [begin, end) of the flat buffers, inside the parameter
  int64_t state = 0;          // offset of `begin`'s moments in exp_avg() / exp_avg_sq()
  int64_t size() const { return end - begin; }
};

class AdamWOptimizer {
 public:
  // ranges: sorted, disjoint ranges of [0, reg.total_floats()) this rank
  // updates (the distributed optimizer's owned_ranges()); empty = the whole
  // buffer (the plain optimizer). dp: for a sharded optimizer, the group whose
  // ranks own the other pieces (the grad norm is summed over it); must be
  // given with ranges, and outlive this object.
  // main_weights: keep fp32 main weights (bf16 runs), see above.
  // packed_grads: the gradients this optimizer reads (grad_norm, step) are
  // packed like its state (segment s at s.state), not in the registry's
  // offsets: Megatron-FSDP's optim_grads shard (optim/staged_grads.h).
  // packed_params: so are the model weights the step writes (bf16 runs'
  // params_bf16; optim_grads_params, optim/staged_params.h), and with main
  // weights in an fp32 run those are the model's: step writes nothing else.
  AdamWOptimizer(const ParamRegistry& reg, const OptimizerConfig& cfg,
                 std::vector<FlatRange> ranges = {}, const Communicator* dp = nullptr,
                 bool main_weights = false, Device device = Device::kCpu,
                 const Communicator* edp = nullptr, bool packed_grads = false,
                 bool packed_params = false);

  // Global L2 norm of the gradients, every element counted once across the
  // data- and model-parallel groups: over this rank's segments (TP-replicated
  // parameters on tp_rank 0 only, the tied word embedding on the first stage
  // only, padding never), summed over DP when sharded and over `mp` (which
  // may be null: no model parallelism).
  // MoE expert parameters are summed over `edp` (sharded) and `emp` (EP x
  // PP: each expert once) instead of dp and mp.
  double grad_norm(const float* grads, Communicator* mp, const Communicator* emp = nullptr) const;
  // Gradient clipping (Megatron, torch): the factor clip/(norm + 1e-6) when
  // that is < 1, else 1 (also without clipping). The step applies it.
  float clip_coefficient(double norm) const;
  // Σ g² over this rank's segments of parameters of `group` (TP-replicated
  // dense ones on tp_rank 0 only, the tied embedding on the first stage only).
  double group_sum_squares(const float* grads, GradGroup group) const;
  // Σ f(range) over `data` with the grad-norm rule and reductions of
  // grad_norm (each element counted once over all ranks): the gradients'
  // squares, or with --log-params-norm the weights', with
  // --log-num-zeros-in-grad the zero gradients. `packed`: segment s's data
  // at s.state (the optimizer's layout: main weights, packed gradients),
  // else at s.begin (the registry's offsets).
  // f sums over all the ranges it is given, in their order.
  using SegmentSum = double (*)(const FloatRange* ranges, size_t count);
  double global_sum(const float* data, bool packed, SegmentSum f, Communicator* mp,
                    const Communicator* emp = nullptr) const;
  bool packed_grads() const { return packed_grads_; }
  // One AdamW (or SGD) step on this rank's segments at `rates` (the input
  // embedding and output layer at rates.decoupled_lr, the others at rates.lr;
  // the decaying parameters with rates.weight_decay), on the
  // gradients times grad_scale (the clip coefficient; grads themselves are
  // not written); advances the step count. Without main weights: `params`
  // (the model's fp32 weights, total floats) in place, params_bf16 null.
  // With them: `params` null, the main weights in place and their bf16
  // rounding written into `params_bf16` (the model's bf16 weights, total
  // elements, same offsets) in the same pass.
  void step(float* params, const float* grads, const StepRates& rates,
            uint16_t* params_bf16 = nullptr, float grad_scale = 1.f);

  bool sharded() const { return sharded_; }
  // Where segment s's gradients start in the `grads` this optimizer reads.
  int64_t grad_offset(const OptimSegment& s) const { return packed_grads_ ? s.state : s.begin; }
  const std::vector<OptimSegment>& segments() const { return segments_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  float* exp_avg() const { return m_; }     // (state_floats())
  float* exp_avg_sq() const { return v_; }  // (state_floats())
  // The fp32 main weights (state_floats()), null without main weights.
  float* main_params() const { return main_; }
  bool has_main_params() const { return main_ != nullptr; }
  int64_t state_floats() const { return state_floats_; }
  size_t state_bytes() const {
    return size_t((main_weights_ ? 3 : 2) * state_floats_) * sizeof(float);
  }
  // m, v (and main) on the model's device (page-rounded on the CPU); the
  // pointers above point into it (GPU memory in GPU runs).
  const DeviceBuffer& state_buffer() const { return buffer_; }
  const OptimizerConfig& config() const { return cfg_; }
  const ParamRegistry& registry() const { return reg_; }

  // Sets the moments of the owned segments of parameter `param` from its
  // whole local tensors m and v (numel() floats each, row-major): loading.
  void set_param_state(size_t param, const float* m, const float* v);
  // Sets the main weights of the owned segments of parameter `param` from its
  // whole local values (numel() floats): initialisation and loading. No-op
  // without main weights.
  void set_main_params(size_t param, const float* values);

 private:
  double group_sum(const float* data, bool packed, SegmentSum f, GradGroup group) const;
  const ParamRegistry& reg_;
  OptimizerConfig cfg_;
  bool sharded_;
  bool packed_grads_, packed_params_;
  const Communicator* dp_;
  const Communicator* edp_;  // expert shards' group (MoE), or null
  std::vector<OptimSegment> segments_;
  int64_t state_floats_ = 0;
  DeviceBuffer buffer_;
  float* m_ = nullptr;
  float* v_ = nullptr;
  bool main_weights_ = false;
  float* main_ = nullptr;
  int64_t steps_ = 0;
};

}  // namespace mt
