#include "model/model_runtime.h"

#include <algorithm>
#include <utility>

#include "kernels/fill.h"

namespace mt {

ModelRuntime::ModelRuntime(const ParamRegistry& r, int64_t micro_batch, const TensorParallel& tp,
                           int64_t in_flight, const Recompute& recompute, MathMode math,
                           const ContextParallel& cp, Device device, const Communicator* ep,
                           GradPlacement grads_at)
    : reg(r), sh(make_shapes(r, micro_batch, tp, 0, cp, 0, ep)), placement_(std::move(grads_at)) {
  MT_CHECK(in_flight >= 1, "in-flight micro-batches ", in_flight, " must be >= 1");
  const size_t n = size_t(r.total_floats());
  const bool bf16 = math == MathMode::kBF16;
  const size_t weights_n =
      placement_.staged() && placement_.weights ? size_t(placement_.weight_floats) : n;
  params_buf_ = DeviceBuffer(device, weights_n * (bf16 ? sizeof(uint16_t) : sizeof(float)));
  grads_buf_ = DeviceBuffer(device, size_t(grad_floats()) * sizeof(float));
  if (bf16)
    params_bf16 = reinterpret_cast<uint16_t*>(params_buf_.data());
  else
    params = reinterpret_cast<float*>(params_buf_.data());
  grads = reinterpret_cast<float*>(grads_buf_.data());
  if (bf16) keep_expert_biases_fp32(device);
  sh.cm.math = math;
  const int num_chunks = int(r.stage().chunk_ranges().size());
  chunks.resize(size_t(num_chunks));
  // The workspace serves every chunk: logits if any has the output, each
  // block kind's scratch if any chunk's layer takes it.
  GptShapes ws_shapes = sh;
  ws_shapes.layer_specs.clear();
  for (int c = 0; c < num_chunks; ++c) {
    chunks[size_t(c)].sh = make_shapes(r, micro_batch, tp, c, cp, 0, ep);
    chunks[size_t(c)].sh.cm = sh.cm;
    set_recompute(chunks[size_t(c)].sh, recompute);
    chunks[size_t(c)].w =
        bind_chunk_weights(r, weights(), c, weights_staged() ? &placement_.weight_offset : nullptr,
                           &kept32_);
    chunks[size_t(c)].g =
        bind_chunk_grads(r, grads, c, placement_.staged() ? &placement_.offset : nullptr);
    ws_shapes.has_output = ws_shapes.has_output || chunks[size_t(c)].sh.has_output;
    if (chunks[size_t(c)].sh.mtp_depths > 0) {  // the MTP depths' scratch
      ws_shapes.mtp_depths = chunks[size_t(c)].sh.mtp_depths;
      ws_shapes.mtp_spec = chunks[size_t(c)].sh.mtp_spec;
    }
    const std::vector<LayerSpec>& specs = chunks[size_t(c)].sh.layer_specs;
    ws_shapes.layer_specs.insert(ws_shapes.layer_specs.end(), specs.begin(), specs.end());
  }
  Arena plan, plan_ws;
  for (const ModelChunk& ch : chunks)
    for (int64_t i = 0; i < in_flight; ++i) carve_activations(plan, ch.sh);
  carve_workspace(plan_ws, ws_shapes);
  act_buf_ = DeviceBuffer(device, plan.used());
  ws_buf_ = DeviceBuffer(device, plan_ws.used());
  Arena real(act_buf_.data(), act_buf_.size()), real_ws(ws_buf_.data(), ws_buf_.size());
  for (ModelChunk& ch : chunks) {
    ch.slots.resize(size_t(in_flight));
    for (MicroBatchSlot& s : ch.slots) {
      s.act = carve_activations(real, ch.sh);
      s.data.tokens.resize(size_t(ch.sh.tokens()));
      s.data.labels.resize(size_t(ch.sh.tokens()));
    }
  }
  ws = carve_workspace(real_ws, ws_shapes);
}

WriteView ModelRuntime::stage_input(int chunk, size_t slot) {
  return chunks[size_t(chunk)].slots[slot].act.hidden;
}

WriteView ModelRuntime::stage_output(int chunk, size_t slot) {
  const ModelChunk& ch = chunks[size_t(chunk)];
  return ch.slots[slot].act.hidden.at(ch.sh.num_layers * boundary_elements());
}

float* ModelRuntime::grad_send_buffer(int chunk, size_t slot) {
  // fp32: the layer-0 input; bf16: the bytes of the first two rows (carved
  // for that: GptActivations::hidden).
  const WriteView h = chunks[size_t(chunk)].slots[slot].act.hidden;
  return h.f32 ? h.f32 : reinterpret_cast<float*>(h.bf16);
}

double ModelRuntime::forward(int chunk, size_t slot, int64_t micro_batch, const MicroBatchFn& next,
                             const PassContext& ctx) {
  ModelChunk& ch = chunks[size_t(chunk)];
  MicroBatchSlot& s = ch.slots[slot];
  next(micro_batch, s.data);
  return gpt_forward(ch.w, ctx.training ? &ch.g : nullptr, s.act, ws, ch.sh, s.data, ctx);
}

void ModelRuntime::backward(int chunk, size_t slot, const PassContext& ctx) {
  ModelChunk& ch = chunks[size_t(chunk)];
  gpt_backward(ch.w, ch.g, ch.slots[slot].act, ws, ch.sh, ctx);
}

void ModelRuntime::keep_expert_biases_fp32(Device device) {
  int64_t floats = 0;
  for (const ParamSpec& p : reg.params()) floats += p.expert_bias ? p.numel() : 0;
  if (floats == 0) return;
  MT_CHECK(!weights_staged(), "expert biases with bf16 weights sharded over data-parallel ranks "
           "(internal error: args/args.cc refuses the pair)");
  kept32_buf_ = DeviceBuffer(device, size_t(floats) * sizeof(float));
  float* at = kept32_buf_.as<float>();
  for (const ParamSpec& p : reg.params()) {
    if (!p.expert_bias) continue;
    kept32_[p.offset] = at;  // zeros until set_param
    at += p.numel();
  }
}

const float* ModelRuntime::kept32(size_t i) const {
  const auto k = kept32_.find(reg.params().at(i).offset);
  return k == kept32_.end() ? nullptr : k->second;
}

void ModelRuntime::set_param(size_t i, const float* values) {
  const ParamSpec& p = reg.params().at(i);
  if (const float* k = kept32(i))
    copy_bytes(const_cast<float*>(k), values, size_t(p.numel()) * sizeof(float));
  if (device() != Device::kCpu) {  // fp32 values go up, then are stored as the weights are
    // (start-up and loading only: one allocation per parameter is fine there)
    const DeviceBuffer up(device(), size_t(p.numel()) * sizeof(float));
    copy_bytes(up.data(), values, up.size());
    const int64_t at = param_offset(i);
    const WriteView dst = params_bf16 ? WriteView(params_bf16 + at) : WriteView(params + at);
    convert(dst, up.as<float>(), p.numel());
    return;
  }
  if (params_bf16)
    f32_to_bf16(params_bf16 + param_offset(i), values, p.numel());
  else
    copy_bytes(params + param_offset(i), values, size_t(p.numel()) * sizeof(float));
}

void ModelRuntime::set_params(const float* values) {
  for (size_t i = 0; i < reg.params().size(); ++i) set_param(i, values + reg.params()[i].offset);
}

void ModelRuntime::get_param(size_t i, float* out) const {
  const ParamSpec& p = reg.params().at(i);
  if (const float* k = kept32(i)) return copy_bytes(out, k, size_t(p.numel()) * sizeof(float));
  if (device() != Device::kCpu) {  // widened on the GPU, then copied down
    const DeviceBuffer down(device(), size_t(p.numel()) * sizeof(float));
    convert(down.as<float>(), weights().at(param_offset(i)), p.numel());
    copy_bytes(out, down.data(), down.size());
    return;
  }
  convert(out, weights().at(param_offset(i)), p.numel());
}

void ModelRuntime::zero_grads() { zero_streaming(grads, grad_floats()); }

}  // namespace mt
