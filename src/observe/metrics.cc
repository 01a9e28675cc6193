#include "observe/metrics.h"

#include <cmath>
#include <cstdio>

#include "model/blocks/transformer_layer.h"
#include "model/mtp.h"

namespace mt {

double flops_per_iteration(const ModelConfig& c, int64_t global_batch) {
  // Megatron-LM's num_floating_point_operations: the sum over the layers of
  // their blocks' counts (model/blocks: QKV, projection and attention
  // products; the MLP), plus the logits.
  const double tokens = double(global_batch) * double(c.seq_length);
  double flops = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) flops += layer_flops(c, l, tokens);
  flops += mtp_flops(c, tokens);  // the MTP depths' layers, norms, eh_proj and logits
  const double h = double(c.hidden_size);
  return flops + 12.0 * tokens * h * h * (double(c.padded_vocab_size) / (2.0 * h));
}

double reported_mfu(double achieved, MfuPeak& peak, std::string* note) {
  if (note) note->clear();
  if (!(achieved > 0) || !std::isfinite(achieved)) return 0;
  if (achieved > peak.flops) {
    if (note && !peak.raised) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "peak raised to the achieved %.1f GFLOP/s per rank: the start-up measurement "
                    "(%.1f GFLOP/s, ",
                    achieved / 1e9, peak.measured / 1e9);
      *note = buf + peak.source + ") was low; MFU from here is against the highest rate achieved";
    }
    peak.flops = achieved;
    peak.raised = true;
  }
  return achieved / peak.flops;
}

std::string human_bytes(size_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1f KB", b / 1e3);
  return buf;
}

std::string human_duration(double seconds) {
  const long t = long(seconds + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh %02ldm %02lds", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm %02lds", t / 60, t % 60);
  return buf;
}

std::string MemoryReport::line() const {
  return "memory per rank (predicted): parameters " + human_bytes(params) + " | gradients " +
         human_bytes(grads) + " | optimizer state " + human_bytes(optimizer) +
         " | activations " + human_bytes(activations) + " | workspace " + human_bytes(workspace) +
         (async_save > 0 ? " | async save copy " + human_bytes(async_save) : std::string()) +
         " | total " +
         human_bytes(params + grads + optimizer + activations + workspace + async_save);
}

}  // namespace mt
