// The dense MLP block (Megatron core's mlp): column-parallel fc1, GELU or
// SwiGLU (fc1 = [gate; up]), row-parallel fc2. Its output is fc2's, before
// the residual's dropout-add (the layer's). An MoE MLP is a sibling block.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/blocks/block.h"

namespace mt {

template <class P>
struct MlpParams {
  P fc1_w{};  // (f/tp, h), SwiGLU: ([gate; up] 2f/tp, h)
  P fc1_b{};  // (f/tp) or (2f/tp)
  P fc2_w{};  // (h, f/tp)
  P fc2_b{};  // (h)
};

// Saved for backward (bf16 values in bf16 runs).
struct MlpRecord {
  ReadView in;    // (s_local, b, h): the norm's output (the layer sets it)
  WriteView fc1;  // (s, b, f_in)  before the activation
  WriteView act;  // (s, b, f)     GELU or SwiGLU output
};

// Scratch shared by every layer and micro-batch.
struct MlpWorkspace {
  float* dfc = nullptr;     // (s, b, f)
  float* dfc_in = nullptr;  // (s, b, 2f)  SwiGLU: gradient of [gate | up]
};

// Adds <prefix>linear_fc1.{weight,bias}, <prefix>linear_fc2.{weight,bias}
// (biases unless --disable-bias-linear) of an MLP of hidden size `ffn` (0:
// --ffn-hidden-size); prefix "decoder.layers.<l>.mlp." (or an MoE layer's
// "...mlp.shared_experts.").
void mlp_param_specs(ParamRegistry& reg, const std::string& prefix, int64_t ffn = 0);

template <class P>
MlpParams<P> bind_mlp(const ParamBinder<P>& bind, const std::string& prefix) {
  return {bind.at(prefix + "linear_fc1.weight"), bind.maybe(prefix + "linear_fc1.bias"),
          bind.at(prefix + "linear_fc2.weight"), bind.maybe(prefix + "linear_fc2.bias")};
}

MlpRecord carve_mlp_record(Arena& arena, const GptShapes& sh);
MlpWorkspace carve_mlp_workspace(Arena& arena, const GptShapes& sh);
// Bytes of one MlpRecord and of the MlpWorkspace.
double mlp_record_bytes(const BlockSizes& z);
double mlp_workspace_bytes(const BlockSizes& z);
// Training FLOPs (forward and backward) over `tokens` tokens (Megatron-LM's count).
double mlp_flops(const ModelConfig& c, double tokens);

// The nonlinearity over n tokens: GELU (or squared ReLU) of fc1 (n, f), or
// SwiGLU of fc1 (n, 2f) = [gate | up]; act (n, f) =.
void mlp_activation_forward(const GptShapes& sh, WriteView act, ReadView fc1, int64_t n);
// The non-gated activation over `count` values (GELU, or relu(x)^2 with
// --squared-relu; the MoE experts use it too): act =; backward dfc1 = dact *
// act'(fc1) (may alias dact). Both save only fc1 for backward.
void plain_activation_forward(const GptShapes& sh, WriteView act, ReadView fc1, int64_t count);
void plain_activation_backward(const GptShapes& sh, float* dfc1, ReadView fc1, const float* dact,
                               int64_t count);

// out (s_local, b, h) = fc2's output (reduced, or reduce-scattered with SP).
void mlp_block_forward(float* out, MlpRecord& rec, const MlpParams<ReadView>& w,
                       const BlockCall& call);
// din (s_local, b, h) =; weight gradients +=. dout (s_local, b, h): gradient of out.
void mlp_block_backward(float* din, const MlpParams<float*>& g, const float* dout,
                        const MlpRecord& rec, MlpWorkspace& ws, const MlpParams<ReadView>& w,
                        const BlockCall& call);

// --- Decoding (model/batched_decoder.h): the block over a step's R rows.
struct MlpDecodeWorkspace {
  float* fc = nullptr;   // (R, f_in)
  float* act = nullptr;  // (R, f)
};
MlpDecodeWorkspace carve_mlp_decode_workspace(Arena& arena, const GptShapes& sh, int64_t rows);
double mlp_decode_workspace_floats(double rows, double f, double f_in);  // fc; act
// out (R, h) = fc2's output (all-reduced over TP) for the tokens whose norm
// outputs are `in` (R, h).
void mlp_block_decode(float* out, MlpDecodeWorkspace& ws, const float* in,
                      const MlpParams<ReadView>& w, const GptShapes& sh, int64_t rows);

// The dense MLP as the default kind of the MLP slot (model/blocks/block_kinds.h).
struct DenseMlp {
  static constexpr const char* name = "dense";
  static constexpr const char* recompute_module = "mlp";  // Megatron's: the dense MLP
  template <class P>
  using Params = MlpParams<P>;
  using Record = MlpRecord;
  using Workspace = MlpWorkspace;
  using DecodeWorkspace = MlpDecodeWorkspace;
  using Shapes = NoShapes;
  static bool applies(const ModelConfig&, int64_t) { return true; }
  static Shapes make_shapes(const ModelConfig&, const StageLayout&, const GptShapes&,
                            const Communicator*) {
    return {};
  }
  static void param_specs(ParamRegistry& reg, const std::string& prefix) {
    mlp_param_specs(reg, prefix);
  }
  template <class P>
  static Params<P> bind(const ParamBinder<P>& b, const std::string& prefix) {
    return bind_mlp(b, prefix);
  }
  static Record carve_record(Arena& a, const GptShapes& sh, const LayerSpec&) {
    return carve_mlp_record(a, sh);
  }
  static Workspace carve_workspace(Arena& a, const GptShapes& sh) {
    return carve_mlp_workspace(a, sh);
  }
  static double record_bytes(const BlockSizes& z, const LayerSpec&) { return mlp_record_bytes(z); }
  static double workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>&) {
    return mlp_workspace_bytes(z);
  }
  static double flops(const ModelConfig& c, double tokens) { return mlp_flops(c, tokens); }
  // fc1 and fc2, TP-split.
  static void plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops);
  static double plan_exchange_elements(const ModelConfig&, const PlanDims&) { return 0; }
  static double plan_recompute(const ModelConfig&, const PlanDims&, const LayerSpec&,
                               std::vector<double>&) {
    return 0;  // no partial recompute (the whole slot: "mlp")
  }
  static void forward(float* out, Record& rec, const Params<ReadView>& w, Workspace&,
                      const BlockCall& call) {
    mlp_block_forward(out, rec, w, call);
  }
  static void backward(float* din, const Params<float*>& g, const float* dout, const Record& rec,
                       Workspace& ws, const Params<ReadView>& w, const BlockCall& call) {
    mlp_block_backward(din, g, dout, rec, ws, w, call);
  }
  static DecodeWorkspace carve_decode_workspace(Arena& a, const GptShapes& sh,
                                                const DecodeDims& dims) {
    return carve_mlp_decode_workspace(a, sh, dims.rows);
  }
  static double decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims);
  static void decode(float* out, DecodeWorkspace& ws, const float* in, const Params<ReadView>& w,
                     const GptShapes& sh, int64_t rows) {
    mlp_block_decode(out, ws, in, w, sh, rows);
  }
};

}  // namespace mt
