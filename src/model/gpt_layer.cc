// One pre-norm transformer layer, forward and backward, as its config makes
// it: GPT-2 (LayerNorm, GELU, biases) or Llama-style (RMSNorm, RoPE on q and
// k, grouped-query attention, SwiGLU, no biases). Megatron's tensor
// parallelism (column-parallel QKV and FC1, row-parallel projection and FC2,
// query groups split over TP) and optional sequence parallelism (norms,
// dropout and residual adds on this rank's sequence slab).
#include <string>

#include "kernels/attention.h"
#include "kernels/dropout.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/layout.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
#include "parallel/context_parallel_attention.h"
#include "model/dropout_sites.h"
#include "model/gpt.h"

namespace mt {

namespace {
std::string site(int64_t layer, const char* what) {
  return "layer" + std::to_string(layer) + "." + what;
}

// Per-head tensors are chunk-major with context parallelism: chunk j of this
// rank's rows is a contiguous (b, a, c, d) tensor at global positions
// chunk_pos0(j). f(j, row offset of the chunk in (s, b, ...) tensors, its
// offset in per-head tensors, global position of its first row).
template <class F>
void for_each_chunk(const GptShapes& sh, F f) {
  const int64_t c = sh.chunk_len();
  for (int64_t j = 0; j < sh.cp_chunks(); ++j)
    f(j * c * sh.b, j * sh.b * sh.a * c * sh.d, sh.chunk_pos0(j));
}

void attention_core_forward(float* ctx, const LayerActivations& act, GptWorkspace& ws,
                            const GptShapes& sh, const AttentionDropout& drop) {
  if (sh.cp.size() > 1)
    context_parallel_attention_forward(ctx, act.lse, act.q, act.k, act.v, attention_dims(sh), sh.g,
                                       drop, sh.cp, ws.attn);
  else
    attention_forward(ctx, act.lse, act.q, act.k, act.v, attention_dims(sh), drop, ws.attn);
}
}  // namespace

void norm_forward(const GptShapes& sh, WriteView out, float* mean, float* rstd, ReadView in,
                  ReadView w, ReadView b, int64_t rows) {
  if (sh.rms_norm)
    rmsnorm_forward(out, rstd, in, w, rows, sh.h, sh.eps);
  else
    layernorm_forward(out, mean, rstd, in, w, b, rows, sh.h, sh.eps);
}

void norm_backward(const GptShapes& sh, float* din, float* dw, float* db, const float* dout,
                   ReadView in, ReadView w, const float* mean, const float* rstd,
                   int64_t rows) {
  if (sh.rms_norm)
    rmsnorm_backward(din, dw, dout, in, w, rstd, rows, sh.h);
  else
    layernorm_backward(din, dw, db, dout, in, w, mean, rstd, rows, sh.h);
}

void mlp_activation_forward(const GptShapes& sh, WriteView act, ReadView fc1, int64_t n) {
  if (sh.swiglu)
    swiglu_forward(act, fc1, n, sh.f);
  else
    gelu_forward(act, fc1, n * sh.f);
}

void layer_forward(const LayerWeights& w, LayerActivations& act, GptWorkspace& ws,
                   const GptShapes& sh, int64_t layer, int64_t sample0, const PassContext& ctx) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h, hl = sh.a * sh.d;
  const int64_t qkv = (sh.a + 2 * sh.g) * sh.d;
  const int64_t c = sh.chunk_len();
  // Attention block.
  norm_forward(sh, act.ln1, act.ln1_mean, act.ln1_rstd, act.input, w.ln1_w, w.ln1_b, nl);
  column_parallel_linear_forward(ws.qkv, ws.full_a, act.ln1, w.qkv_w, w.qkv_b, n, h, qkv, sh.tp,
                                 sh.cm);
  // q, k, v in fp32 (the record's, or in bf16 runs workspace), RoPE, then
  // (bf16) rounded into the record once.
  const bool bf16 = act.q.bf16 != nullptr;
  float* q = bf16 ? ws.dq : act.q.f32;
  float* k = bf16 ? ws.dk : act.k.f32;
  float* v = bf16 ? ws.dv : act.v.f32;
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t pos0) {
    qkv_to_heads(q + heads, k + heads, v + heads, ws.qkv + rows * qkv, c, sh.b, sh.a, sh.g, sh.d);
    if (sh.rope) {
      rope_forward(q + heads, sh.b, sh.a, c, sh.d, *sh.rope, pos0);
      rope_forward(k + heads, sh.b, sh.a, c, sh.d, *sh.rope, pos0);
    }
  });
  const int64_t heads = sh.b * sh.a * sh.s * sh.d;
  if (bf16) {
    convert(act.q, q, heads);
    convert(act.k, k, heads);
    convert(act.v, v, heads);
  }
  float* attn_out = bf16 ? ws.dctx : act.ctx;
  attention_core_forward(attn_out, act, ws, sh, attention_dropout_spec(sh, ctx, layer, sample0));
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t) {
    heads_to_sbh(act.ctx_sbh.at(rows * hl), attn_out + heads, c, sh.b, sh.a, sh.d);
  });
  row_parallel_linear_forward(ws.hbuf, ws.full_a, act.ctx_sbh, w.proj_w, w.proj_b, n, hl, h, sh.tp, sh.cm);
  hidden_dropout_add_forward(sh, act.mid, ws.hbuf, act.input,
                             hidden_dropout_spec(sh, ctx, site(layer, "post_attention"), sample0));
  // MLP block.
  norm_forward(sh, act.ln2, act.ln2_mean, act.ln2_rstd, act.mid, w.ln2_w, w.ln2_b, nl);
  column_parallel_linear_forward(act.fc1, ws.full_a, act.ln2, w.fc1_w, w.fc1_b, n, h, sh.f_in,
                                 sh.tp, sh.cm);
  mlp_activation_forward(sh, act.act, act.fc1, n);
  row_parallel_linear_forward(ws.hbuf, ws.full_a, act.act, w.fc2_w, w.fc2_b, n, sh.f, h, sh.tp, sh.cm);
  hidden_dropout_add_forward(sh, act.output, ws.hbuf, act.mid,
                             hidden_dropout_spec(sh, ctx, site(layer, "post_mlp"), sample0));
}

void layer_backward(const LayerWeights& w, const LayerGrads& g, const LayerActivations& act,
                    GptWorkspace& ws, const GptShapes& sh, int64_t layer, int64_t sample0,
                    const PassContext& ctx) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h, hl = sh.a * sh.d;
  const int64_t qkv = (sh.a + 2 * sh.g) * sh.d;
  const int64_t c = sh.chunk_len();
  // MLP block: output = mid + dropout(fc2(act(fc1(norm2(mid))))).  ws.dres = d output.
  hidden_dropout_backward(sh, ws.hbuf, ws.dres,
                          hidden_dropout_spec(sh, ctx, site(layer, "post_mlp"), sample0));
  row_parallel_linear_backward(ws.dfc, g.fc2_w, g.fc2_b, ws.full_a, ws.hbuf, act.act, w.fc2_w, n,
                               sh.f, h, sh.tp, sh.cm);
  float* dfc1 = ws.dfc;
  if (sh.swiglu) {
    swiglu_backward(ws.dfc_in, act.fc1, ws.dfc, n, sh.f);
    dfc1 = ws.dfc_in;
  } else {
    gelu_backward(ws.dfc, act.fc1, ws.dfc, n * sh.f);
  }
  column_parallel_linear_backward(ws.dln, g.fc1_w, g.fc1_b, ws.full_a, ws.full_b, dfc1, act.ln2,
                                  w.fc1_w, n, h, sh.f_in, sh.tp, sh.cm);
  norm_backward(sh, ws.dres, g.ln2_w, g.ln2_b, ws.dln, act.mid, w.ln2_w, act.ln2_mean,
                act.ln2_rstd, nl);  // ws.dres = d mid
  // Attention block: mid = input + dropout(proj(attn(rope(qkv(norm1(input)))))).
  hidden_dropout_backward(sh, ws.hbuf, ws.dres,
                          hidden_dropout_spec(sh, ctx, site(layer, "post_attention"), sample0));
  row_parallel_linear_backward(ws.dctx_sbh, g.proj_w, g.proj_b, ws.full_a, ws.hbuf, act.ctx_sbh,
                               w.proj_w, n, hl, h, sh.tp, sh.cm);
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t) {
    sbh_to_heads(ws.dctx + heads, ws.dctx_sbh + rows * hl, c, sh.b, sh.a, sh.d);
  });
  const AttentionDropout drop = attention_dropout_spec(sh, ctx, layer, sample0);
  if (sh.cp.size() > 1)
    context_parallel_attention_backward(ws.dq, ws.dk, ws.dv, ws.dctx, act.q, act.k, act.v,
                                        act.ctx_sbh, act.lse, attention_dims(sh), sh.g, drop, sh.cp,
                                        ws.attn);
  else
    attention_backward(ws.dq, ws.dk, ws.dv, ws.dctx, act.q, act.k, act.v, act.ctx, act.lse,
                       attention_dims(sh), drop, ws.attn);
  for_each_chunk(sh, [&](int64_t rows, int64_t heads, int64_t pos0) {
    if (sh.rope) {
      rope_backward(ws.dq + heads, sh.b, sh.a, c, sh.d, *sh.rope, pos0);
      rope_backward(ws.dk + heads, sh.b, sh.a, c, sh.d, *sh.rope, pos0);
    }
    heads_to_qkv(ws.qkv + rows * qkv, ws.dq + heads, ws.dk + heads, ws.dv + heads, c, sh.b, sh.a,
                 sh.g, sh.d);
  });
  column_parallel_linear_backward(ws.dln, g.qkv_w, g.qkv_b, ws.full_a, ws.full_b, ws.qkv, act.ln1,
                                  w.qkv_w, n, h, qkv, sh.tp, sh.cm);
  norm_backward(sh, ws.dres, g.ln1_w, g.ln1_b, ws.dln, act.input, w.ln1_w, act.ln1_mean,
                act.ln1_rstd, nl);  // ws.dres = d input
}

}  // namespace mt
