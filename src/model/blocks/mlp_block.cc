#include "model/blocks/mlp_block.h"

#include "kernels/gelu.h"
#include "kernels/matmul.h"
#include "kernels/squared_relu.h"
#include "kernels/swiglu.h"

namespace mt {

void mlp_param_specs(ParamRegistry& reg, const std::string& prefix, int64_t ffn) {
  const ModelConfig& cfg = reg.config();
  const int64_t h = cfg.hidden_size, f = ffn > 0 ? ffn : cfg.ffn_hidden_size;
  const float std = cfg.init_method_std;
  const float out_std = output_init_std(cfg);
  // SwiGLU's fc1 is [gate; up], split over TP block by block.
  const int64_t blocks = cfg.swiglu ? 2 : 1;
  reg.add(prefix + "linear_fc1.weight", cfg.fc1_rows(f), h, 2, 0, Init::kNormal, std, true,
          blocks);
  if (cfg.add_bias())
    reg.add(prefix + "linear_fc1.bias", cfg.fc1_rows(f), 1, 1, 0, Init::kZeros, 0, false, blocks);
  reg.add(prefix + "linear_fc2.weight", h, f, 2, 1, Init::kNormal, out_std, true);
  if (cfg.add_bias()) reg.add(prefix + "linear_fc2.bias", h, 1, 1, -1, Init::kZeros, 0, false);
}

MlpRecord carve_mlp_record(Arena& arena, const GptShapes& sh) {
  MlpRecord r;
  r.fc1 = alloc_act(arena, sh, sh.tokens() * sh.f_in);
  r.act = alloc_act(arena, sh, sh.tokens() * sh.f);
  return r;
}

MlpWorkspace carve_mlp_workspace(Arena& arena, const GptShapes& sh) {
  MlpWorkspace ws;
  ws.dfc = arena.alloc_f32(sh.tokens() * sh.f);
  if (sh.swiglu) ws.dfc_in = arena.alloc_f32(sh.tokens() * sh.f_in);
  return ws;
}

// fc1 and act: n·(f_in + f) saved values. Korthikanti et al. 2022, eq. 1
// (MLP part, f = 4h: 19sbh bytes in fp16 with its input): GELU input 8 ↔
// fc1; FC2 input 8 ↔ act; dropout mask 1 ↔ none (the FC1 input 2 is the norm's).
double mlp_record_bytes(const BlockSizes& z) { return z.e * z.n * (z.f_in + z.f); }

// dfc (s, b, f); SwiGLU dfc_in (s, b, 2f): n·f (+ 2 · n·f) floats.
double mlp_workspace_bytes(const BlockSizes& z) {
  return 4.0 * (z.n * z.f + (z.swiglu ? z.n * z.f_in : 0.0));
}

// A gated MLP has three h x ffn matrices, not two.
double mlp_flops(const ModelConfig& c, double tokens) {
  const double h = double(c.hidden_size);
  return 12.0 * tokens * h * h * (double(c.ffn_hidden_size) / h * (c.swiglu ? 1.5 : 1.0));
}

void mlp_activation_forward(const GptShapes& sh, WriteView act, ReadView fc1, int64_t n) {
  if (sh.swiglu)
    swiglu_forward(act, fc1, n, sh.f);
  else
    plain_activation_forward(sh, act, fc1, n * sh.f);
}

void plain_activation_forward(const GptShapes& sh, WriteView act, ReadView fc1, int64_t count) {
  if (sh.squared_relu)
    squared_relu_forward(act, fc1, count);
  else
    gelu_forward(act, fc1, count);
}

void plain_activation_backward(const GptShapes& sh, float* dfc1, ReadView fc1, const float* dact,
                               int64_t count) {
  if (sh.squared_relu)
    squared_relu_backward(dfc1, fc1, dact, count);
  else
    gelu_backward(dfc1, fc1, dact, count);
}

void mlp_block_forward(float* out, MlpRecord& rec, const MlpParams<ReadView>& w,
                       const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const int64_t n = sh.tokens(), h = sh.h;
  column_parallel_linear_forward(rec.fc1, call.full_a, rec.in, w.fc1_w, w.fc1_b, n, h, sh.f_in,
                                 sh.tp, sh.cm);
  mlp_activation_forward(sh, rec.act, rec.fc1, n);
  row_parallel_linear_forward(out, call.full_a, rec.act, w.fc2_w, w.fc2_b, n, sh.f, h, sh.tp,
                              sh.cm);
}

void mlp_block_backward(float* din, const MlpParams<float*>& g, const float* dout,
                        const MlpRecord& rec, MlpWorkspace& ws, const MlpParams<ReadView>& w,
                        const BlockCall& call) {
  const GptShapes& sh = call.sh;
  const int64_t n = sh.tokens(), h = sh.h;
  row_parallel_linear_backward(ws.dfc, g.fc2_w, g.fc2_b, call.full_a, dout, rec.act, w.fc2_w, n,
                               sh.f, h, sh.tp, sh.cm);
  float* dfc1 = ws.dfc;
  if (sh.swiglu) {
    swiglu_backward(ws.dfc_in, rec.fc1, ws.dfc, n, sh.f);
    dfc1 = ws.dfc_in;
  } else {
    plain_activation_backward(sh, ws.dfc, rec.fc1, ws.dfc, n * sh.f);
  }
  column_parallel_linear_backward(din, g.fc1_w, g.fc1_b, call.full_a, call.full_b, dfc1, rec.in,
                                  w.fc1_w, n, h, sh.f_in, sh.tp, sh.cm);
}

MlpDecodeWorkspace carve_mlp_decode_workspace(Arena& arena, const GptShapes& sh, int64_t rows) {
  MlpDecodeWorkspace ws;
  ws.fc = arena.alloc_f32(rows * sh.f_in);
  ws.act = arena.alloc_f32(rows * sh.f);
  return ws;
}

double mlp_decode_workspace_floats(double rows, double f, double f_in) { return rows * (f_in + f); }

void mlp_block_decode(float* out, MlpDecodeWorkspace& ws, const float* in,
                      const MlpParams<ReadView>& w, const GptShapes& sh, int64_t rows) {
  linear_forward(ws.fc, in, w.fc1_w, w.fc1_b, rows, sh.h, sh.f_in);  // column-parallel
  mlp_activation_forward(sh, ws.act, ws.fc, rows);
  row_parallel_linear_forward(out, out, ws.act, w.fc2_w, w.fc2_b, rows, sh.f, sh.h, sh.tp);
}

double DenseMlp::decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims) {
  const double f = double(c.ffn_hidden_size) / double(tp);
  return mlp_decode_workspace_floats(double(dims.rows), f, c.swiglu ? 2 * f : f);
}

void DenseMlp::plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops) {
  const double f = double(c.ffn_hidden_size);
  flops.push_back(2 * d.n * d.h * double(c.fc1_rows(c.ffn_hidden_size)) / d.tp);
  flops.push_back(2 * d.n * f * d.h / d.tp);
}

}  // namespace mt
