#include "train/train_step.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/log.h"
#include "kernels/moe_router.h"
#include "kernels/reduce.h"

namespace mt {

void set_param_values(ModelRuntime& rt, AdamWOptimizer& opt, size_t i, const float* values) {
  rt.set_param(i, values);
  opt.set_main_params(i, values);
}

void initialize_weights(ModelRuntime& rt, AdamWOptimizer& opt, uint64_t seed) {
  std::vector<float> values;  // one parameter at a time
  for (size_t i = 0; i < rt.reg.params().size(); ++i) {
    values.resize(size_t(rt.reg.params()[i].numel()));
    rt.reg.initialize_param(i, values.data(), seed);
    set_param_values(rt, opt, i, values.data());
  }
}

PipelineLinks pipeline_links(const ParallelState& ps) {
  return PipelineLinks{&ps.pp_comm, ps.pp_rank, ps.pp_size};
}

void update_expert_biases(ModelRuntime& rt, AdamWOptimizer& opt, ParallelState& ps,
                          std::vector<double>& tokens) {
  const ModelConfig& c = rt.reg.config();
  // Summed over TP x CP x DP (Megatron's tp_dp_cp group; DP spans EP): every
  // rank that shares this stage's routers. Integers in double: exact.
  double* t = tokens.data();
  const int64_t size = int64_t(tokens.size());
  if (ps.tp_size > 1) ps.tp_comm.all_reduce_sum(t, size);
  if (ps.dp_cp().size() > 1) ps.dp_cp().all_reduce_sum(t, size);
  std::vector<float> bias(size_t(c.num_experts));
  for (size_t i = 0; i < rt.reg.params().size(); ++i) {
    const ParamSpec& p = rt.reg.params()[i];
    if (!p.expert_bias) continue;
    rt.get_param(i, bias.data());
    moe_expert_bias_update(bias.data(), t + p.layer * c.num_experts, c.num_experts,
                           c.moe_router_bias_update_rate);
    set_param_values(rt, opt, i, bias.data());
  }
}

StepResult train_step(ModelRuntime& rt, AdamWOptimizer& opt, GradSync& sync, ParallelState& ps,
                      const std::vector<PipeOp>& schedule, int64_t iteration,
                      const StepRates& rates,
                      int64_t num_micro_batches, int64_t loss_tokens, uint64_t seed,
                      const MicroBatchFn& next, GradScaler* scaler, bool check_nan,
                      bool per_token_loss, RerunCheck* rerun) {
  PassContext ctx;
  ctx.seed = seed;
  ctx.iteration = iteration;
  StepResult r;
  r.loss_scale = scaler ? scaler->scale() : 1.0;
  // Gradients are averaged over DP x CP: a token's loss weighs 1 / (tokens of
  // its micro-batch x micro-batches) — with a loss mask the micro-batch's
  // counted tokens (gpt_forward) — or, per token, DP x CP / the iteration's.
  ctx.per_token_loss = per_token_loss;
  ctx.grad_scale =
      per_token_loss
          ? float(r.loss_scale * double(ps.dp_size * ps.cp_size) /
                  double(std::max<int64_t>(loss_tokens, 1)))
          : float(r.loss_scale / double(rt.tokens_per_micro_batch() * num_micro_batches));
  // --overlap-param-gather: wait per bucket; optim_grads_params: gather per part.
  ctx.params_needed = sync.params_hook();
  // The MoE router losses' gradient (Megatron's MoEAuxLossAutoScaler scale),
  // times CP as the token losses are (grad_scale's tokens are this rank's
  // s/CP): each CP rank holds part of those losses, and gradients are
  // averaged over DP x CP.
  ctx.aux_loss_scale = float(r.loss_scale * double(ps.cp_size) / double(num_micro_batches));
  // The forward and backward, the gradients' sync and the global mean loss:
  // once, and again for --rerun-mode (the same weights, batch and dropout keys).
  const ModelConfig& config = rt.reg.config();
  MoeStats moe;
  MtpStats mtp;
  const auto forward_backward = [&]() -> double {
    sync.zero_grads();
    moe = MoeStats{};
    if (config.moe_router_enable_expert_bias)
      moe.expert_tokens.assign(  // the decoder's layers, then the MTP depths' (model/mtp.h)
          size_t((config.num_layers + config.mtp_num_layers) * config.num_experts), 0.0);
    ctx.moe_stats = &moe;
    mtp.loss.assign(size_t(config.mtp_num_layers), 0.0);
    mtp.correct.assign(size_t(config.mtp_num_layers), 0.0);
    mtp.total.assign(size_t(config.mtp_num_layers), 0.0);
    ctx.mtp_stats = &mtp;
    Timer timer;
    double wait = 0;
    double loss_sum = run_pipeline_schedule(rt, pipeline_links(ps), schedule, ctx, next,
                                            &sync.hook(), &wait, sync.every_micro_batch());
    r.wait_seconds += wait;
    r.forward_backward_seconds += timer.seconds();
    timer.reset();
    sync.finish();  // TP sum of SP grads, DP average (or reduce-scatter), tied embedding
    r.grads_sync_seconds += timer.seconds();
    if (ps.pp_size > 1) ps.pp_comm.all_reduce_sum(&loss_sum, 1);  // the last stage's loss
    ps.dp_cp().all_reduce_sum(&loss_sum, 1);  // each CP rank summed its own tokens
    r.loss = loss_sum / double(std::max<int64_t>(loss_tokens, 1));
    r.moe = config.moe();
    if (r.moe) {
      // Each (layer, micro-batch) was counted on its TP x CP ranks, each with its part.
      double sums[3] = {moe.load_balancing_loss, moe.z_loss, double(moe.layer_passes)};
      ps.world_comm.all_reduce_sum(sums, 3);
      ps.world_comm.all_reduce_max(&moe.busiest_share, 1);
      const double items = sums[2] / double(ps.tp_size * ps.cp_size);
      r.load_balancing_loss = items > 0 ? sums[0] / items : 0;
      r.z_loss = items > 0 ? sums[1] / items : 0;
      r.busiest_share = moe.busiest_share;
    }
    if (config.mtp()) {
      // The last stage's sums of each micro-batch's token mean (each CP rank
      // holds its part of the mean over the whole micro-batch, so that CP
      // leaves the numbers alone; Megatron averages the CP ranks' own means),
      // averaged over the micro-batches and DP, as Megatron logs them.
      const size_t depths = mtp.loss.size();
      std::vector<double> m(mtp.loss);  // losses, correct, total
      m.insert(m.end(), mtp.correct.begin(), mtp.correct.end());
      m.insert(m.end(), mtp.total.begin(), mtp.total.end());
      if (ps.pp_size > 1) ps.pp_comm.all_reduce_sum(m.data(), int64_t(m.size()));
      ps.dp_cp().all_reduce_sum(m.data(), int64_t(m.size()));
      r.mtp_losses.resize(depths);
      for (size_t d = 0; d < depths; ++d)
        r.mtp_losses[d] = m[d] / double(num_micro_batches * ps.dp_size);
      r.mtp_correct.assign(m.begin() + int64_t(depths), m.begin() + int64_t(2 * depths));
      r.mtp_total.assign(m.begin() + int64_t(2 * depths), m.end());
    }
    return r.loss;
  };
  forward_backward();
  if (rerun != nullptr && rerun->enabled())
    rerun->after_forward_backward(iteration, r.loss, forward_backward);  // may throw RerunExit
  // The expert biases move with this step's loads, as Megatron's
  // finalize_model_grads does before the optimizer (also on a skipped step);
  // AdamW leaves them (no gradient).
  if (config.moe_router_enable_expert_bias) {
    update_expert_biases(rt, opt, ps, moe.expert_tokens);
    // For the log: every stage's layers (each stage counted only its own).
    if (ps.pp_size > 1)
      ps.pp_comm.all_reduce_sum(moe.expert_tokens.data(), int64_t(moe.expert_tokens.size()));
    const auto& t = moe.expert_tokens;
    for (size_t l = 0; l < t.size(); l += size_t(config.num_experts))
      r.expert_tokens.emplace_back(t.begin() + int64_t(l),
                                   t.begin() + int64_t(l + size_t(config.num_experts)));
  }
  Timer timer;
  if (scaler != nullptr) {
    // Unscale this rank's reduced gradients (its optimizer segments; with the
    // distributed optimizer the rest of the buffer is scratch) and agree on
    // overflow everywhere: one rank's inf must skip every rank's step.
    int found_inf = 0;
    float* grads = sync.optimizer_grads();
    for (const OptimSegment& seg : opt.segments())
      found_inf |= int(unscale_and_check(grads + opt.grad_offset(seg), seg.size(),
                                         float(scaler->inv_scale())));
    ps.world_comm.all_reduce_max(&found_inf, 1);
    scaler->update(found_inf != 0);
    if (found_inf) {
      MT_CHECK(std::isfinite(r.loss), "iteration ", iteration, ": loss ", r.loss,
               " is not finite (not a gradient overflow); stopped before the update, without "
               "saving; fix: lower --lr, raise --lr-warmup-iters or set --clip-grad");
      r.skipped = true;
      r.grad_norm = std::nan("");
      r.optimizer_seconds = timer.seconds();
      return r;  // no update: the weights stay as they are
    }
  }
  // Grad norm, clipping, AdamW and the distributed optimizer's all-gather.
  TimelineSpan span(ps.timeline(), TimelineKind::kOptimizer, "optimizer step");
  r.grad_norm = opt.grad_norm(sync.optimizer_grads(), ps.mp_comm.size() > 1 ? &ps.mp_comm : nullptr,
                              &ps.emp_comm);
  // Without the check (Megatron's --no-check-for-nan-in-loss-and-grad) the
  // update goes ahead, as there.
  MT_CHECK(!check_nan || (std::isfinite(r.loss) && std::isfinite(r.grad_norm)), "iteration ", iteration,
           ": loss ", r.loss, ", grad norm ", r.grad_norm,
           " is not finite; stopped before the update, without saving (the last good checkpoint, "
           "if any, is untouched); fix: lower --lr, raise --lr-warmup-iters or set --clip-grad "
           "(--no-check-for-nan-in-loss-and-grad trains on)");
  // bf16: the step updates the fp32 main weights and writes the model's bf16
  // ones; clipping scales the gradients inside it.
  opt.step(sync.step_params(), sync.optimizer_grads(), rates, sync.step_params_bf16(),
           opt.clip_coefficient(r.grad_norm));
  sync.gather_params();  // distributed optimizer: all-gather the updated pieces
  r.optimizer_seconds = timer.seconds();
  return r;
}

}  // namespace mt
