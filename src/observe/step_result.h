// What one training iteration reports (train/train_step.h's train_step
// returns it): the loss, the gradient norm, the time in each part, and the
// MoE and MTP numbers. The logs (observe/training_log.h, tensorboard_log.h,
// rank_timers.h) read it; a plain record, so that observing a step needs
// nothing of the loop.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

struct StepResult {
  double loss = 0;          // mean token loss over the global batch
  int64_t global_batch = 0; // this iteration's (the trainer's; args/batch_rampup.h)
  double grad_norm = 0;     // before clipping
  double wait_seconds = 0;  // this rank's time blocked on pipeline neighbours
  bool skipped = false;     // fp16: a gradient overflowed, no update (grad_norm is NaN)
  double loss_scale = 1;    // fp16: the scale this step's backward used
  // MoE models: the router's losses over their coefficients, averaged over
  // the MoE layers and micro-batches (as Megatron logs them), and the largest
  // share of routed choices one expert took in any layer and micro-batch.
  bool moe = false;
  double load_balancing_loss = 0, z_loss = 0, busiest_share = 0;
  // --moe-router-enable-expert-bias: the routed tokens per expert that moved
  // the biases this step, a list of experts per layer (the decoder's, then
  // the MTP depths'; summed over every rank that shares a router; zeros for
  // a dense layer); empty otherwise.
  std::vector<std::vector<double>> expert_tokens;
  // --mtp-num-layers: each depth's loss (Megatron's "mtp_k loss": the token
  // mean per micro-batch, averaged over the micro-batches and DP); empty without MTP.
  std::vector<double> mtp_losses;
  // Each depth's acceptance counts (Megatron's): counted tokens whose
  // shifted label is the argmax, and counted tokens, over the global batch.
  std::vector<double> mtp_correct, mtp_total;
  // This rank's time in Megatron's timers: the schedule's forward and
  // backward, the gradient sync's finish, and the rest of the step (unscale,
  // norm, clip, AdamW, parameter gather).
  double forward_backward_seconds = 0, grads_sync_seconds = 0, optimizer_seconds = 0;
  // --log-params-norm / --log-num-zeros-in-grad (observe/step_stats.h); < 0: not logged.
  double params_norm = -1;
  int64_t num_zeros = -1;
};

}  // namespace mt
