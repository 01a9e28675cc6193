// A gated-GELU MLP (GEGLU, Shazeer 2020) as a user's own block kind: a block
// the library does not have, written only against the installed public header
// megatron/block.h. The library's tests include this file too
// (tests/model/registered_mlp_test.cc checks its gradient by finite
// differences, tests/model_mpi its tensor-parallel equivalence).
//
//   gate = X Wg^T + bg     column-parallel: Wg (f, h) split by rows over TP
//   up   = X Wu^T          column-parallel: Wu (f, h) split by rows
//   act  = gelu(gate) * up                 this rank's f/tp features alone
//   out  = act Wd^T + bd   row-parallel:    Wd (h, f) split by columns, bd replicated
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include <megatron/block.h>

namespace custom_block {

class GatedGeluMlp : public megatron::MlpBlock {
 public:
  // Parameter indices, in the order of params().
  enum : int { kGate, kGateBias, kUp, kDown, kDownBias };

  std::vector<megatron::ParamDecl> params(const megatron::BlockDims& d) const override {
    using megatron::ParamDecl;
    const int64_t h = d.hidden, f = d.ffn_hidden;
    return {
        {"linear_gate.weight", f, h, 0, ParamDecl::Init::kNormal},
        {"linear_gate.bias", f, 1, 0, ParamDecl::Init::kZeros},
        {"linear_up.weight", f, h, 0, ParamDecl::Init::kNormal},
        {"linear_down.weight", h, f, 1, ParamDecl::Init::kNormal, 0.f, /*output_layer=*/true},
        {"linear_down.bias", h, 1, -1, ParamDecl::Init::kZeros},
    };
  }
  // gate, up and act of every token: 3 · n · f/tp (backward reads all three).
  int64_t record_floats(const megatron::BlockDims& d) const override {
    return 3 * d.tokens * local_ffn(d);
  }
  // d(act), d(gate), d(up).
  int64_t workspace_floats(const megatron::BlockDims& d) const override {
    return 3 * d.tokens * local_ffn(d);
  }
  // Three h x f GEMMs, 2 FLOPs per multiply-add, forward plus twice that backward.
  double flops(const megatron::BlockDims& d, double tokens) const override {
    return 3.0 * 3.0 * 2.0 * tokens * double(d.hidden) * double(d.ffn_hidden);
  }

  void forward(float* out, const float* in, const megatron::BlockPass& pass) const override {
    const int64_t count = pass.dims().tokens * local_ffn(pass.dims());
    float* gate = pass.record();
    float* up = gate + count;
    float* act = up + count;
    pass.column_linear(gate, in, kGate, kGateBias);
    pass.column_linear(up, in, kUp);
    for (int64_t i = 0; i < count; ++i) act[i] = gelu(gate[i]) * up[i];
    pass.row_linear(out, act, kDown, kDownBias);
  }

  void backward(float* din, const float* dout, const float* in,
                const megatron::BlockPass& pass) const override {
    const int64_t count = pass.dims().tokens * local_ffn(pass.dims());
    const float* gate = pass.record();
    const float* up = gate + count;
    const float* act = up + count;
    float* dact = pass.workspace();
    float* dgate = dact + count;
    float* dup = dgate + count;
    pass.row_linear_backward(dact, dout, act, kDown, kDownBias);
    for (int64_t i = 0; i < count; ++i) {
      dgate[i] = dact[i] * up[i] * gelu_grad(gate[i]);
      dup[i] = dact[i] * gelu(gate[i]);
    }
    pass.column_linear_backward(din, dgate, in, kGate, kGateBias);
    pass.column_linear_backward(din, dup, in, kUp);
  }

 private:
  static int64_t local_ffn(const megatron::BlockDims& d) { return d.ffn_hidden / d.tp_size; }
  // GELU's tanh approximation (GPT-2's) and its derivative.
  static constexpr float kC = 0.7978845608f;  // sqrt(2 / pi)
  static float gelu(float x) {
    return 0.5f * x * (1.f + std::tanh(kC * (x + 0.044715f * x * x * x)));
  }
  static float gelu_grad(float x) {
    const float t = std::tanh(kC * (x + 0.044715f * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kC * (1.f + 3.f * 0.044715f * x * x);
  }
};

}  // namespace custom_block
