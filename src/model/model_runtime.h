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
  // math: how GEMMs compute; with bf16 a bf16 copy of the parameters (the
  // weights GEMMs read) is kept next to the fp32 ones — refresh it with
  // refresh_weight_copy() whenever the fp32 parameters change.
  ModelRuntime(const ParamRegistry& reg, int64_t micro_batch,
               const TensorParallel& tp = TensorParallel{}, int64_t in_flight = 1,
               const std::string& recompute_method = "", int64_t recompute_num_layers = 0,
               MathMode math = MathMode::kF32);

  const ParamRegistry& reg;
  GptShapes sh;             // chunk 0's shapes (sizes and groups are the same for all)
  float* params = nullptr;  // (total_floats)
  float* grads = nullptr;   // (total_floats)
  std::vector<ModelChunk> chunks;  // one unless the pipeline is interleaved
  GptWorkspace ws;          // shared by every chunk and micro-batch

  // The single chunk's views (ranks without virtual stages).
  const GptWeights& w() const { return chunks[0].w; }
  const GptWeights& g() const { return chunks[0].g; }
  std::vector<MicroBatchSlot>& slots() { return chunks[0].slots; }

  size_t param_bytes() const { return size_t(reg.total_floats()) * sizeof(float); }
  // The memory this rank holds, by class (HostBuffers: resident_bytes() is
  // what their first touch added to the process).
  const HostBuffer& params_buffer() const { return params_buf_; }
  const HostBuffer& grads_buffer() const { return grads_buf_; }
  const HostBuffer& weight_copy_buffer() const { return copy_buf_; }  // empty unless bf16
  const HostBuffer& activations_buffer() const { return act_buf_; }   // saved activation records
  const HostBuffer& workspace_buffer() const { return ws_buf_; }      // per-step scratch
  // Planned bytes of activation records and workspace (before page rounding).
  size_t activation_bytes() const { return act_buf_.size() + ws_buf_.size(); }
  MathMode math() const { return sh.cm.math; }
  // bf16: the GEMMs' copy of the weights = round(params), of all of them or
  // of floats [begin, end). No-op otherwise.
  void refresh_weight_copy();
  void refresh_weight_copy(int64_t begin, int64_t end);
  // The bf16 copy itself (total floats, the parameters' offsets); null unless bf16.
  uint16_t* weight_copy() {
    return copy_buf_.size() ? reinterpret_cast<uint16_t*>(copy_buf_.data()) : nullptr;
  }
  void zero_grads();

 private:
  HostBuffer params_buf_, grads_buf_, copy_buf_, act_buf_, ws_buf_;
};

// Fills tokens/labels (b, s) of micro-batch k; returns the global index of its
// first sample (which keys its dropout masks).
using MicroBatchFn = std::function<int64_t(int64_t k, int32_t* tokens, int32_t* labels)>;

}  // namespace mt
