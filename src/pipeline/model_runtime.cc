#include "pipeline/model_runtime.h"

#include <algorithm>

namespace mt {

ModelRuntime::ModelRuntime(const ParamRegistry& r, int64_t micro_batch, const TensorParallel& tp,
                           int64_t in_flight, const std::string& recompute_method,
                           int64_t recompute_num_layers)
    : reg(r), sh(make_shapes(r, micro_batch, tp, 0)) {
  MT_CHECK(in_flight >= 1, "in-flight micro-batches ", in_flight, " must be >= 1");
  params_buf_ = HostBuffer(param_bytes());
  grads_buf_ = HostBuffer(param_bytes());
  params = reinterpret_cast<float*>(params_buf_.data());
  grads = reinterpret_cast<float*>(grads_buf_.data());
  const int num_chunks = int(r.stage().chunk_ranges().size());
  chunks.resize(size_t(num_chunks));
  GptShapes ws_shapes = sh;  // the workspace serves every chunk: logits if any has the output
  for (int c = 0; c < num_chunks; ++c) {
    chunks[size_t(c)].sh = make_shapes(r, micro_batch, tp, c);
    set_full_recompute(chunks[size_t(c)].sh, recompute_method, recompute_num_layers);
    chunks[size_t(c)].w = bind_chunk_weights(r, params, c);
    chunks[size_t(c)].g = bind_chunk_weights(r, grads, c);
    ws_shapes.has_output = ws_shapes.has_output || chunks[size_t(c)].sh.has_output;
  }
  Arena plan;
  for (const ModelChunk& ch : chunks)
    for (int64_t i = 0; i < in_flight; ++i) carve_activations(plan, ch.sh);
  carve_workspace(plan, ws_shapes);
  activation_bytes_ = plan.used();
  act_buf_ = HostBuffer(plan.used());
  Arena real(act_buf_.data(), act_buf_.size());
  for (ModelChunk& ch : chunks) {
    ch.slots.resize(size_t(in_flight));
    ch.fwd_sends.resize(size_t(in_flight));
    ch.bwd_sends.resize(size_t(in_flight));
    for (MicroBatchSlot& s : ch.slots) {
      s.act = carve_activations(real, ch.sh);
      s.tokens.resize(size_t(ch.sh.tokens()));
      s.labels.resize(size_t(ch.sh.tokens()));
    }
  }
  ws = carve_workspace(real, ws_shapes);
}

void ModelRuntime::zero_grads() { std::fill(grads, grads + reg.total_floats(), 0.f); }

}  // namespace mt
