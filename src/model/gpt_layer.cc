// One pre-norm transformer layer, forward and backward, composed of its
// blocks (model/blocks) by its LayerSpec: norm → attention → residual
// dropout-add → norm → MLP → residual dropout-add, the attention and the MLP
// of the kinds the spec names (model/blocks/block_kinds.h). GPT-2 (LayerNorm, GELU,
// biases) and Llama-style (RMSNorm, RoPE, grouped-query attention, SwiGLU, no
// biases) are configurations of the same blocks. Under sequence parallelism
// the norms, dropout and residual adds run on this rank's sequence slab; the
// blocks gather and scatter around their tensor-parallel linears.
#include <string>

#include "model/dropout_sites.h"
#include "model/gpt.h"

namespace mt {

namespace {
std::string site(int64_t layer, const char* what) {
  return "layer" + std::to_string(layer) + "." + what;
}

// The MLP slot's record of kind K: the layer's own, or with a recomputed slot
// the workspace's shared one, reading this layer's pre_mlp_layernorm output.
template <class K>
typename K::type::Record& mlp_record(LayerActivations& act, GptWorkspace& ws) {
  auto& rec = act.recompute_mlp ? std::get<K::index>(ws.layer.mlp_recompute)
                                : std::get<K::index>(act.mlp);
  rec.in = act.ln2.out;
  return rec;
}

// With recomputed norm outputs (LayerSpec::recompute_norms) both norms write
// the workspace's one buffer, which the attention and the MLP then read.
void bind_norm_outputs(const LayerWeights& w, LayerActivations& act, GptWorkspace& ws) {
  if (!act.recompute_norms) return;
  act.ln1.out = act.ln2.out = ws.layer.norm_out;
  with_kind<AttentionKinds>(w.spec.attention,
                            [&](auto k) { std::get<k.index>(act.attention).in = act.ln1.out; });
}

// out (nl, h) = the MLP slot's forward, into its record.
void mlp_forward(float* out, const LayerWeights& w, LayerActivations& act, GptWorkspace& ws,
                 const BlockCall& call) {
  with_kind<MlpKinds>(w.spec.mlp, [&](auto k) {
    decltype(k)::type::forward(out, mlp_record<decltype(k)>(act, ws), std::get<k.index>(w.mlp),
                               std::get<k.index>(ws.layer.mlp), call);
  });
}
}  // namespace

void layer_forward(const LayerWeights& w, LayerActivations& act, GptWorkspace& ws,
                   const GptShapes& sh, int64_t layer, int64_t sample0, const TokenDocuments& docs,
                   const PassContext& ctx) {
  const BlockCall call{sh, ctx, layer, sample0, ws.full_a, ws.full_b, docs};
  bind_norm_outputs(w, act, ws);
  // input_layernorm → self_attention; mid = input + dropout(attention).
  norm_block_forward(act.ln1, act.input, w.ln1, sh);
  with_kind<AttentionKinds>(w.spec.attention, [&](auto k) {
    decltype(k)::type::forward(ws.hbuf, std::get<k.index>(act.attention),
                               std::get<k.index>(w.attention),
                               std::get<k.index>(ws.layer.attention), call);
  });
  hidden_dropout_add_forward(sh, act.mid, ws.hbuf, act.input,
                             hidden_dropout_spec(sh, ctx, site(layer, "post_attention"), sample0));
  // pre_mlp_layernorm → mlp; output = mid + dropout(mlp).
  norm_block_forward(act.ln2, act.mid, w.ln2, sh);
  mlp_forward(ws.hbuf, w, act, ws, call);
  hidden_dropout_add_forward(sh, act.output, ws.hbuf, act.mid,
                             hidden_dropout_spec(sh, ctx, site(layer, "post_mlp"), sample0));
}

void layer_backward(const LayerWeights& w, const LayerGrads& g, LayerActivations& act,
                    GptWorkspace& ws, const GptShapes& sh, int64_t layer, int64_t sample0,
                    const TokenDocuments& docs, const PassContext& ctx) {
  const BlockCall call{sh, ctx, layer, sample0, ws.full_a, ws.full_b, docs};
  bind_norm_outputs(w, act, ws);
  // Recomputed norms (Megatron's "layernorm" module): pre_mlp_layernorm's
  // output again from the kept residual, the same values (and statistics).
  if (act.recompute_norms) norm_block_forward(act.ln2, act.mid, w.ln2, sh);
  if (act.recompute_mlp) {
    // Selective recompute (Megatron's checkpointed MLP / MoE layer): re-run
    // the slot's forward from its kept input into the workspace's record. The
    // same weights, input and routing give the same activations.
    const PassContext again = ctx.recomputing();
    const BlockCall recall{sh, again, layer, sample0, ws.full_a, ws.full_b, docs};
    mlp_forward(ws.hbuf, w, act, ws, recall);
  }
  // MLP half: output = mid + dropout(mlp(norm2(mid))).  ws.dres = d output.
  hidden_dropout_backward(sh, ws.hbuf, ws.dres,
                          hidden_dropout_spec(sh, ctx, site(layer, "post_mlp"), sample0));
  with_kind<MlpKinds>(w.spec.mlp, [&](auto k) {
    decltype(k)::type::backward(ws.dln, std::get<k.index>(g.mlp), ws.hbuf,
                                mlp_record<decltype(k)>(act, ws),
                                std::get<k.index>(ws.layer.mlp), std::get<k.index>(w.mlp), call);
  });
  norm_block_backward(ws.dres, g.ln2, ws.dln, act.ln2, act.mid, w.ln2, sh);  // ws.dres = d mid
  if (act.recompute_norms) norm_block_forward(act.ln1, act.input, w.ln1, sh);
  // Attention half: mid = input + dropout(attention(norm1(input))).
  hidden_dropout_backward(sh, ws.hbuf, ws.dres,
                          hidden_dropout_spec(sh, ctx, site(layer, "post_attention"), sample0));
  with_kind<AttentionKinds>(w.spec.attention, [&](auto k) {
    decltype(k)::type::backward(ws.dln, std::get<k.index>(g.attention), ws.hbuf,
                                std::get<k.index>(act.attention),
                                std::get<k.index>(ws.layer.attention),
                                std::get<k.index>(w.attention), call);
  });
  norm_block_backward(ws.dres, g.ln1, ws.dln, act.ln1, act.input, w.ln1, sh);  // ws.dres = d input
}

}  // namespace mt
