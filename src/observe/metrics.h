// What a training run reports: FLOPs per iteration (Megatron-LM's
// num_floating_point_operations), throughput, MFU, memory per rank.
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"

namespace mt {

// Megatron-LM's formula for a GPT (no GQA, no MoE, no SwiGLU): 12·B·s·L·h² ·
// ((1 + 1 + s/(2h)) + f/h + V/(2Lh)); causal attention counted half.
double flops_per_iteration(const ModelConfig& c, int64_t global_batch);

// The MFU denominator of a run, per rank: the matmul peak measured at
// start-up (or --peak-tflops), raised to any achieved rate above it. A rank
// that does more FLOP/s than its "peak" shows that the measurement was low (a
// shared machine busy while it ran, shapes faster than those measured), so
// the honest denominator from then on is the highest rate achieved, and MFU
// is never above 1.
struct MfuPeak {
  double flops = 0;     // the denominator now
  double measured = 0;  // what start-up measured (or --peak-tflops gave)
  std::string source;   // where `measured` came from, for the note
  bool raised = false;  // flops > measured: raised to an achieved rate
};

// achieved / peak.flops, after raising peak.flops to `achieved` when it is
// higher, so never above 1 (0 for an achieved rate that is not positive and
// finite). `note` (optional) is set the first time the peak is raised — "peak
// raised to the achieved X GFLOP/s per rank: the start-up measurement (Y,
// source) was low; ..." — and cleared otherwise, so a log says it once.
double reported_mfu(double achieved, MfuPeak& peak, std::string* note = nullptr);

struct MemoryReport {
  size_t params = 0, grads = 0, optimizer = 0, activations = 0, workspace = 0;
  size_t async_save = 0;  // --async-save's host copy; shown only when > 0
  std::string line() const;  // "memory per rank (predicted): parameters 1.2 MB | ..."
};

std::string human_bytes(size_t bytes);
// "1h 02m 03s"
std::string human_duration(double seconds);

}  // namespace mt
