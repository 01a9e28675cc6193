// One rank's model in memory: parameter and gradient buffers, weight views,
// the activation records of the micro-batches in flight and the workspace —
// planned once, touched at start-up, reused every step. The pipeline executor
// (pipeline/schedules.h) runs micro-batches through it by the stage interface
// below (chunks, slots, boundary buffers, forward, backward) and knows no GPT
// type; the communication between stages (receives, sends and their handles)
// is the executor's.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/device.h"
#include "core/arena.h"
#include "model/gpt.h"
#include "model/micro_batch.h"
#include "model/params.h"

namespace mt {

// One micro-batch in flight: its activation record and its data.
struct MicroBatchSlot {
  GptActivations act;
  MicroBatchInput data;
};

// One model chunk (virtual pipeline stage) of this rank: its shapes, weight
// and gradient views, and the activation records of its micro-batches in flight.
struct ModelChunk {
  GptShapes sh;
  GptWeights w;
  GptGrads g;
  std::vector<MicroBatchSlot> slots;
};

// Where the parameters' gradients live: by default one buffer in the
// registry's offsets (reg.total_floats()); with Megatron-FSDP's optim_grads
// (optim/staged_grads.h) a staging pool of `floats`, parameter i's gradient
// at offset[i] (several parameters may share floats: the pool is reused).
// weights: the weights live in a pool too (optim_grads_params: each part's
// weights all-gathered into it before use, optim/staged_params.h), of
// weight_floats, parameter i's at weight_offset[i] (the gradients' layout with
// a second layer region, so that the next layer's gather can run beside this one's).
struct GradPlacement {
  int64_t floats = -1;          // < 0: the registry's layout
  std::vector<int64_t> offset;  // per parameter (with floats >= 0)
  bool weights = false;
  int64_t weight_floats = 0;
  std::vector<int64_t> weight_offset;
  bool staged() const { return floats >= 0; }
};

class ModelRuntime {
 public:
  // `in_flight`: activation records to plan per chunk (1 without pipelining;
  // with 1F1B a stage keeps up to PP − pp_rank micro-batches in flight).
  // recompute: full activation recompute per chunk and the selectively
  // recomputed blocks (Recompute, set_recompute in model/gpt_shapes.h); {}
  // keeps every activation.
  // math: how GEMMs compute; with bf16 the weights are stored in bf16 (what
  // every kernel reads; the fp32 main weights are the optimizer's), else fp32.
  // ep: the expert-parallel group of MoE layers (null: every expert here).
  // grads_at: where the gradients live (GradPlacement).
  ModelRuntime(const ParamRegistry& reg, int64_t micro_batch,
               const TensorParallel& tp = TensorParallel{}, int64_t in_flight = 1,
               const Recompute& recompute = {}, MathMode math = MathMode::kF32, const ContextParallel& cp = ContextParallel{},
               Device device = Device::kCpu, const Communicator* ep = nullptr,
               GradPlacement grads_at = {});

  const ParamRegistry& reg;
  GptShapes sh;             // chunk 0's shapes (sizes and groups are the same for all)
  // The weights, in the registry's offsets: fp32 (fp32 and fp16 runs) or
  // bf16 (bf16 runs); the other pointer is null.
  // (total_floats), or with staged weights the pool (grad_floats()).
  float* params = nullptr;
  uint16_t* params_bf16 = nullptr;
  // Where parameter i's weights start in params / params_bf16.
  int64_t param_offset(size_t i) const {
    return weights_staged() ? placement_.weight_offset[i] : reg.params()[i].offset;
  }
  bool weights_staged() const { return placement_.staged() && placement_.weights; }
  float* grads = nullptr;  // fp32 gradients: (total_floats), or the staging pool (grad_floats())
  // Parameter i's gradient (its whole local tensor, numel() floats).
  float* grad_of(size_t i) const {
    return grads + (placement_.staged() ? placement_.offset[i] : reg.params()[i].offset);
  }
  int64_t grad_floats() const {
    return placement_.staged() ? placement_.floats : reg.total_floats();
  }
  bool grads_staged() const { return placement_.staged(); }
  ReadView weights() const { return params_bf16 ? ReadView(params_bf16) : ReadView(params); }
  SavedWeights weights_to_save() const { return {weights(), &kept32_}; }
  std::vector<ModelChunk> chunks;  // one unless the pipeline is interleaved
  GptWorkspace ws;          // shared by every chunk and micro-batch

  // The single chunk's views (ranks without virtual stages).
  const GptWeights& w() const { return chunks[0].w; }
  const GptGrads& g() const { return chunks[0].g; }
  std::vector<MicroBatchSlot>& slots() { return chunks[0].slots; }

  // --- Stage interface (what the pipeline executor calls). A chunk is a
  // virtual pipeline stage of this rank; a slot holds one micro-batch in
  // flight (the executor picks slot = micro-batch mod slots_per_chunk()).
  int num_chunks() const { return int(chunks.size()); }
  size_t slots_per_chunk() const { return chunks[0].slots.size(); }
  // Elements of one activation passed between stages: (s_local, b, h),
  // stored as the activations are (bf16 in bf16 runs; gradients are fp32).
  int64_t boundary_elements() const { return sh.local_tokens() * sh.h; }
  // The slot's layer-0 input (s_local, b, h): where an activation received
  // from the previous stage goes before forward.
  WriteView stage_input(int chunk, size_t slot);
  // The slot's last-layer output (s_local, b, h), valid after forward: what is
  // sent to the next stage.
  WriteView stage_output(int chunk, size_t slot);
  // (s_local, b, h) fp32 in the slot's activation record, which backward no
  // longer needs: where the input gradient waits while it is being sent.
  float* grad_send_buffer(int chunk, size_t slot);
  // (s_local, b, h) in the shared workspace: before backward of a chunk without
  // the loss head, the gradient of its output (received from the next stage);
  // after any backward, the gradient of its input. Overwritten by the next backward.
  float* input_grad() { return ws.dres; }
  // Forward of micro-batch `micro_batch` through `chunk` in `slot`: next()
  // fills the slot's tokens and labels (and gives the sample index that keys
  // dropout); on the first stage the tokens are embedded, else stage_input()
  // must hold the received activation. Returns the sum of token losses (the
  // chunk with the loss head; 0 elsewhere); with ctx.training it also
  // accumulates the output layer's gradient (the loss head's backward is fused).
  double forward(int chunk, size_t slot, int64_t micro_batch, const MicroBatchFn& next,
                 const PassContext& ctx);
  // Backward of the slot's micro-batch through `chunk`: parameter gradients
  // accumulate (+=) into grads, the input gradient is left in input_grad().
  void backward(int chunk, size_t slot, const PassContext& ctx);

  // --- Sizes the training loop needs.
  int64_t tokens_per_micro_batch() const { return sh.tokens(); }  // b · s (s/CP with CP)
  int64_t total_layers() const { return sh.total_layers; }        // in the whole model
  bool sequence_parallel() const { return sh.tp.sequence_parallel; }

  // The memory this rank holds, by class, on its device (resident_bytes():
  // on the CPU what the buffer's first touch added to the process).
  const DeviceBuffer& params_buffer() const { return params_buf_; }  // fp32 or bf16 weights
  const DeviceBuffer& grads_buffer() const { return grads_buf_; }
  const DeviceBuffer& activations_buffer() const { return act_buf_; }   // saved activation records
  const DeviceBuffer& workspace_buffer() const { return ws_buf_; }      // per-step scratch
  Device device() const { return params_buf_.device(); }
  // Planned bytes of activation records and workspace (before page rounding).
  size_t activation_bytes() const { return act_buf_.size() + ws_buf_.size(); }
  MathMode math() const { return sh.cm.math; }
  // Parameter i's weights (its whole local tensor, numel() floats) = values,
  // rounded to bf16 in bf16 runs: initialisation and loading (with staged
  // weights into the pool, which the next gather overwrites).
  void set_param(size_t i, const float* values);
  // All weights from a flat fp32 buffer in the registry's offsets (tests).
  void set_params(const float* values);
  // out (numel()) = parameter i's weights, widened to fp32.
  void get_param(size_t i, float* out) const;
  // grads = 0, all grad_floats() (OpenMP threads each clear a contiguous part: one memset would
  // be one core's store bandwidth; on the GPU one memset).
  void zero_grads();

 private:
  GradPlacement placement_;
  // bf16 runs: the routers' expert biases also in fp32 (Megatron keeps the
  // buffer fp32 under bf16: its updates of ~1e-3 would round away), what the
  // routing reads and get_param returns; registry offset -> its copy.
  DeviceBuffer kept32_buf_;
  std::map<int64_t, const float*> kept32_;
  void keep_expert_biases_fp32(Device device);
  const float* kept32(size_t i) const;  // parameter i's fp32 copy, or null
  DeviceBuffer params_buf_, grads_buf_, act_buf_, ws_buf_;
};

}  // namespace mt
