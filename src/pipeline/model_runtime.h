// One rank's model in memory: parameter and gradient buffers, weight views,
// the activation records of the micro-batches in flight and the workspace —
// planned once, touched at start-up, reused every step. Schedules
// (pipeline/schedules.h) run micro-batches through it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "model/gpt.h"
#include "model/params.h"

namespace mt {

// One micro-batch in flight: its activation record and its data.
struct MicroBatchSlot {
  GptActivations act;
  std::vector<int32_t> tokens, labels;  // (b, s)
};

// One model chunk (virtual pipeline stage) of this rank: its shapes, weight
// and gradient views, and the activation records of its micro-batches in flight.
struct ModelChunk {
  GptShapes sh;
  GptWeights w, g;
  std::vector<MicroBatchSlot> slots;
  // Per slot: the pending send of its output activation and of its input
  // gradient (schedules wait on them before reusing the slot's buffers).
  std::vector<CommHandle> fwd_sends, bwd_sends;
};

class ModelRuntime {
 public:
  // `in_flight`: activation records to plan per chunk (1 without pipelining;
  // with 1F1B a stage keeps up to PP − pp_rank micro-batches in flight).
  // recompute_method / recompute_num_layers: full activation recompute per
  // chunk (set_full_recompute in model/gpt.h); "" keeps every activation.
  ModelRuntime(const ParamRegistry& reg, int64_t micro_batch,
               const TensorParallel& tp = TensorParallel{}, int64_t in_flight = 1,
               const std::string& recompute_method = "", int64_t recompute_num_layers = 0);

  const ParamRegistry& reg;
  const GptShapes sh;       // chunk 0's shapes (sizes and groups are the same for all)
  float* params = nullptr;  // (total_floats)
  float* grads = nullptr;   // (total_floats)
  std::vector<ModelChunk> chunks;  // one unless the pipeline is interleaved
  GptWorkspace ws;          // shared by every chunk and micro-batch

  // The single chunk's views (ranks without virtual stages).
  const GptWeights& w() const { return chunks[0].w; }
  const GptWeights& g() const { return chunks[0].g; }
  std::vector<MicroBatchSlot>& slots() { return chunks[0].slots; }

  size_t param_bytes() const { return size_t(reg.total_floats()) * sizeof(float); }
  // Planned bytes of activation records and workspace (before page rounding).
  size_t activation_bytes() const { return activation_bytes_; }
  void zero_grads();

 private:
  HostBuffer params_buf_, grads_buf_, act_buf_;
  size_t activation_bytes_ = 0;
};

// Fills tokens/labels (b, s) of micro-batch k; returns the global index of its
// first sample (which keys its dropout masks).
using MicroBatchFn = std::function<int64_t(int64_t k, int32_t* tokens, int32_t* labels)>;

}  // namespace mt
