// The stage-level GPT pass: embedding (first stage), the stage's layers, and
// the fused loss head (last stage): final LayerNorm → tied output layer →
// softmax cross-entropy, whose logits gradient is consumed in forward.
#include "model/gpt.h"

#include <algorithm>
#include <map>

#include "backend/device.h"

#include "core/divide.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "model/dropout_sites.h"
#include "parallel/vocab_parallel_cross_entropy.h"
#include "parallel/vocab_parallel_embedding.h"

namespace mt {

namespace {
// One binding for values and gradients: view(offset) makes a P at that offset.
template <class P>
GptParams<P> bind_chunk(const ParamRegistry& reg, int chunk, const ParamBinder<P>& bind) {
  const StageLayout& st = reg.stage();
  const auto ranges = st.chunk_ranges();
  const bool embedding = st.has_embedding && chunk == 0;
  const bool output = st.has_output && chunk == int(ranges.size()) - 1;
  const bool tied = reg.config().tied_output();
  GptParams<P> w;
  // The last stage holds the word embedding for the tied output and for MTP.
  const bool mtp = output && reg.config().mtp();
  if (embedding || (output && tied) || mtp) w.wte = bind.at("embedding.word_embeddings.weight");
  if (embedding) w.wpe = bind.maybe("embedding.position_embeddings.weight");
  for (int64_t l = ranges[size_t(chunk)].first; l < ranges[size_t(chunk)].second; ++l)
    w.layers.push_back(bind_layer(bind, l));
  if (output) {
    w.lnf = bind_norm(bind, "decoder.final_layernorm");
    w.out = tied ? w.wte : bind.at("output_layer.weight");
    w.mtp = bind_mtp(bind);
  }
  return w;
}

// Registry offset -> placed offset (a staging pool's, optim/staged_grads.h).
std::map<int64_t, int64_t> placed_offsets(const ParamRegistry& reg,
                                          const std::vector<int64_t>& placement) {
  MT_CHECK(placement.size() == reg.params().size(), "placement of ", placement.size(),
           " parameters for a registry of ", reg.params().size(), " (internal error)");
  std::map<int64_t, int64_t> at;
  for (size_t i = 0; i < reg.params().size(); ++i) at[reg.params()[i].offset] = placement[i];
  return at;
}

}  // namespace

GptWeights bind_chunk_weights(const ParamRegistry& reg, ReadView base, int chunk,
                              const std::vector<int64_t>* placement,
                              const std::map<int64_t, const float*>* kept32) {
  const std::map<int64_t, int64_t> at =
      placement ? placed_offsets(reg, *placement) : std::map<int64_t, int64_t>{};
  return bind_chunk<ReadView>(reg, chunk, {reg, [&](int64_t off) {
                                if (kept32)
                                  if (const auto k = kept32->find(off); k != kept32->end())
                                    return ReadView(k->second);
                                return base.at(placement ? at.at(off) : off);
                              }});
}

GptGrads bind_chunk_grads(const ParamRegistry& reg, float* grads, int chunk,
                          const std::vector<int64_t>* placement) {
  if (placement == nullptr)
    return bind_chunk<float*>(reg, chunk, {reg, [&](int64_t off) { return grads + off; }});
  const std::map<int64_t, int64_t> at = placed_offsets(reg, *placement);
  return bind_chunk<float*>(reg, chunk, {reg, [&](int64_t off) { return grads + at.at(off); }});
}

GptWeights bind_weights(const ParamRegistry& reg, ReadView base) {
  MT_CHECK(reg.stage().chunk_ranges().size() == 1,
           "bind_weights of a rank with virtual pipeline chunks; use bind_chunk_weights");
  return bind_chunk_weights(reg, base, 0);
}

GptShapes make_shapes(const ParamRegistry& reg, int64_t micro_batch, const TensorParallel& tp,
                      int chunk, const ContextParallel& cp, int64_t rope_positions,
                      const Communicator* ep) {
  const ModelConfig& c = reg.config();
  const StageLayout& st = reg.stage();
  const auto ranges = st.chunk_ranges();
  MT_CHECK(tp.size() == st.tp_size, "TP group of size ", tp.size(), " for a parameter list built ",
           "for TP ", st.tp_size, " (internal error)");
  GptShapes sh;
  sh.tp = tp;
  if (tp.size() == 1) sh.tp.sequence_parallel = false;
  sh.cp = cp;
  sh.s_global = c.seq_length;
  if (cp.size() > 1)
    divide(c.seq_length, 2 * cp.size(), "--seq-length by 2 x CP (context parallelism)");
  sh.s = c.seq_length / cp.size();
  sh.s_local = sh.tp.sequence_parallel
                   ? divide(sh.s, tp.size(), "--seq-length / CP by TP (sequence parallelism)")
                   : sh.s;
  sh.t0 = sh.tp.sequence_parallel ? sh.s_local * st.tp_rank : 0;
  sh.b = micro_batch;
  sh.h = c.hidden_size;
  sh.a_global = c.num_attention_heads;
  sh.a = divide(c.num_attention_heads, st.tp_size, "--num-attention-heads by TP");
  sh.head0 = sh.a * st.tp_rank;
  sh.d = c.head_dim();
  sh.g = divide(c.query_groups(), st.tp_size, "--num-query-groups by TP");
  sh.f = divide(c.ffn_hidden_size, st.tp_size, "--ffn-hidden-size by TP");
  sh.f_in = c.swiglu ? 2 * sh.f : sh.f;
  sh.v = divide(c.padded_vocab_size, st.tp_size, "padded vocabulary by TP");
  sh.v_start = sh.v * st.tp_rank;
  sh.max_pos = c.max_position_embeddings;
  sh.vocab_size = c.vocab_size;
  sh.num_layers = ranges[size_t(chunk)].second - ranges[size_t(chunk)].first;
  sh.layer_begin = ranges[size_t(chunk)].first;
  sh.total_layers = c.num_layers;
  sh.has_embedding = st.has_embedding && chunk == 0;
  sh.has_output = st.has_output && chunk == int(ranges.size()) - 1;
  sh.rms_norm = c.rms_norm();
  sh.learned_positions = c.learned_positions();
  sh.swiglu = c.swiglu;
  sh.squared_relu = c.squared_relu;
  sh.zero_centered_gamma = c.apply_layernorm_1p;
  sh.qk_layernorm = c.qk_layernorm;
  sh.window_left = c.window_left();
  for (int64_t l = sh.layer_begin; l < sh.layer_begin + sh.num_layers; ++l)
    sh.layer_specs.push_back(layer_spec(c, l));
  sh.rope_positions = rope_positions > 0 ? rope_positions : c.seq_length;
  if (c.rope() && !c.multi_latent_attention)
    sh.rope = std::make_shared<const RopeTable>(
        make_rope_table(sh.rope_positions, sh.d,
                        c.rotary_percent, c.rotary_base, c.rope_scaling()));
  if (sh.has_output && c.mtp()) {
    sh.mtp_depths = c.mtp_num_layers;
    sh.mtp_spec = mtp_layer_spec(c);
    sh.mtp_scale = c.mtp_loss_scaling_factor;
  }
  sh.eps = c.layernorm_epsilon;
  sh.hidden_dropout = c.hidden_dropout;
  sh.attention_dropout = c.attention_dropout;
  sh.kinds = make_kind_shapes(c, st, sh, ep);
  return sh;
}

void set_full_recompute(GptShapes& sh, const std::string& method, int64_t num_layers) {
  sh.recompute_group.assign(size_t(sh.num_layers), -1);
  sh.recompute_group_size = 0;
  if (method.empty() || num_layers <= 0) return;
  MT_CHECK(method == "uniform" || method == "block", "--recompute-method '", method,
           "' is not one of uniform, block");
  if (method == "uniform") {
    for (int64_t l = 0; l < sh.num_layers; ++l) sh.recompute_group[size_t(l)] = l / num_layers * num_layers;
    sh.recompute_group_size = std::min(num_layers, sh.num_layers);
  } else {
    for (int64_t l = 0; l < std::min(num_layers, sh.num_layers); ++l) sh.recompute_group[size_t(l)] = l;
    sh.recompute_group_size = 1;
  }
}

void set_recompute(GptShapes& sh, const Recompute& r) {
  set_full_recompute(sh, r.method, r.num_layers);
  for (LayerSpec& spec : sh.layer_specs) mark_recomputed(spec, r.modules);
  // The MTP depths' layers too (Megatron's MoE layers of MTP are recomputed
  // alike); their spec is the last layer's, whose kind's shared record the
  // workspace then holds.
  mark_recomputed(sh.mtp_spec, r.modules);
}

LayerRecords layer_records(const GptShapes& sh) {
  LayerRecords r;
  std::vector<std::pair<int64_t, LayerSpec>> places;  // (place in its group, spec) of each scratch
  for (int64_t l = 0; l < sh.num_layers; ++l) {
    const int64_t group = sh.recompute_group.empty() ? -1 : sh.recompute_group[size_t(l)];
    const LayerSpec spec = sh.spec(l);
    if (group < 0) {
      r.kept.push_back(spec);
      r.scratch_of.push_back(-1);
      continue;
    }
    const std::pair<int64_t, LayerSpec> place{l - group, spec};
    size_t i = 0;
    while (i < places.size() && places[i] != place) ++i;
    if (i == places.size()) {
      places.push_back(place);
      r.scratch.push_back(spec);
    }
    r.scratch_of.push_back(int64_t(i));
  }
  return r;
}

GptActivations carve_activations(Arena& arena, const GptShapes& sh) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  GptActivations act;
  act.ids = static_cast<int32_t*>(arena.alloc(DType::kF32, {n}).data);  // 4-byte slots
  act.positions = static_cast<int32_t*>(arena.alloc(DType::kF32, {n}).data);
  act.labels = static_cast<int32_t*>(arena.alloc(DType::kF32, {n}).data);
  const bool bf16 = sh.cm.math == MathMode::kBF16;
  act.hidden = alloc_act(arena, sh, (bf16 ? std::max<int64_t>(sh.num_layers + 1, 2)
                                          : sh.num_layers + 1) * nl * h);
  // Recomputed layers share scratch records: one per place in a group and
  // layer spec there (a group's layers may take other kinds than the first group's).
  const LayerRecords plan = layer_records(sh);
  std::vector<LayerActivations> scratch;
  for (const LayerSpec& spec : plan.scratch) scratch.push_back(carve_layer_record(arena, sh, spec));
  for (int64_t l = 0; l < sh.num_layers; ++l) {
    const int64_t slot = plan.scratch_of[size_t(l)];
    LayerActivations la = slot >= 0 ? scratch[size_t(slot)]
                                    : carve_layer_record(arena, sh, sh.spec(l));
    if (!arena.counting()) {
      la.input = act.hidden.at(l * nl * h);
      la.output = act.hidden.at((l + 1) * nl * h);
    }
    act.layers.push_back(la);
  }
  if (sh.has_output) {
    if (!sh.rms_norm) act.lnf_mean = arena.alloc_f32(nl);
    act.lnf_rstd = arena.alloc_f32(nl);
    act.dlnf = arena.alloc_f32(nl * h);
    act.losses = arena.alloc_f32(n);
    act.mtp = carve_mtp_record(arena, sh);
  }
  if (!arena.counting()) {
    act.host_ids.resize(size_t(n));
    act.host_positions.resize(size_t(n));
    act.host_labels.resize(size_t(n));
    if (sh.has_output) act.host_losses.resize(size_t(n));
  }
  return act;
}

GptWorkspace carve_workspace(Arena& arena, const GptShapes& sh) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  GptWorkspace ws;
  ws.hbuf = arena.alloc_f32(nl * h);
  ws.full_a = arena.alloc_f32(n * h);
  ws.full_b = arena.alloc_f32(n * h);
  if (sh.has_output) {
    ws.logits = arena.alloc_f32(n * sh.v);
    if (sh.cm.math == MathMode::kBF16)  // the output layer's GEMMs read it in bf16 anyway
      ws.dlogits16 = reinterpret_cast<uint16_t*>(arena.alloc_f32((n * sh.v + 1) / 2));
    ws.ce_max = arena.alloc_f32(n);
    ws.ce_sum = reinterpret_cast<double*>(arena.alloc_f32(2 * n));
    ws.ce_target = reinterpret_cast<double*>(arena.alloc_f32(2 * n));
  }
  ws.dres = arena.alloc_f32(nl * h);
  ws.dln = arena.alloc_f32(nl * h);
  ws.layer = carve_layer_workspace(arena, sh);
  ws.mtp = carve_mtp_workspace(arena, sh);
  return ws;
}

double gpt_forward(const GptWeights& w, const GptGrads* grads, GptActivations& act,
                   GptWorkspace& ws, const GptShapes& sh, const MicroBatchInput& mb,
                   const PassContext& ctx) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  auto need = [&](int64_t part) {
    if (ctx.params_needed) (*ctx.params_needed)(part);
  };
  act.sample0 = mb.first_sample;
  // Positions (s, b): the data's own (--reset-position-ids) or 0, 1, ... (with
  // CP this rank's chunks' global ones); every stage keeps them for RoPE.
  int32_t* positions = act.host_positions.data();
  for (int64_t t = 0; t < sh.s; ++t)
    for (int64_t bi = 0; bi < sh.b; ++bi)
      positions[t * sh.b + bi] = mb.positions.empty() ? int32_t(sh.global_position(t))
                                                      : mb.positions[size_t(bi * sh.s + t)];
  act.docs.positions = mb.positions.empty() ? nullptr : positions;
  act.docs.doc_start = mb.doc_start.empty() ? nullptr : mb.doc_start.data();
  if (sh.has_embedding) {
    need(-1);
    // Tokens arrive (b, s); activations are sequence-first (s, b).
    const int32_t* tokens = mb.tokens.data();
    int32_t* ids = act.host_ids.data();
    for (int64_t t = 0; t < sh.s; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi) ids[t * sh.b + bi] = tokens[bi * sh.s + t];
    for (int64_t i = 0; i < n; ++i)
      MT_CHECK(ids[i] >= 0 && ids[i] < sh.vocab_size, "token id ", ids[i],
               " at sequence position ", i / sh.b, " is outside the vocabulary of ", sh.vocab_size,
               "; fix: preprocess the data with the tokenizer of this model, or pass the right "
               "--vocab-size");
    copy_bytes(act.ids, ids, size_t(n) * sizeof(int32_t));
    copy_bytes(act.positions, positions, size_t(n) * sizeof(int32_t));
    // The embedding sum in fp32 (the record itself, or bf16 runs' workspace),
    // then dropout into the record (rounded in bf16).
    float* emb = act.hidden.f32 ? act.hidden.f32 : ws.hbuf;
    vocab_parallel_embedding_forward(emb, ws.full_a, act.ids, w.wte, n, h, sh.v_start, sh.v,
                                     sh.tp);
    if (sh.learned_positions)
      embedding_forward(emb, act.positions + sh.t0 * sh.b, w.wpe, nl, h, 0, sh.max_pos, true);
    hidden_dropout_forward(sh, act.hidden, emb,
                           hidden_dropout_spec(sh, ctx, "embedding", act.sample0));
  }
  for (int64_t l = 0; l < sh.num_layers; ++l) {
    need(sh.layer_begin + l);
    layer_forward(w.layers[size_t(l)], act.layers[size_t(l)], ws, sh, sh.layer_begin + l,
                  act.sample0, act.docs, ctx);
  }
  if (!sh.has_output) return 0.0;
  need(sh.total_layers);
  if (w.out == w.wte) need(-1);  // the output layer is the tied word embedding

  // Loss head: final norm, then the output layer — a column-parallel linear
  // with the vocab-sharded output weight (the word embedding when tied) — and the
  // vocab-parallel cross-entropy. Its backward runs here, so the logits
  // never outlive this micro-batch's forward.
  const ReadView last = act.hidden.at(sh.num_layers * nl * h);
  // The norm's output goes to workspace: the output layer's backward, its
  // only other reader, runs below.
  float* lnf = ws.hbuf;
  norm_forward(sh, lnf, act.lnf_mean, act.lnf_rstd, last, w.lnf.w, w.lnf.b, nl);
  column_parallel_linear_forward(ws.logits, ws.full_a, lnf, w.out, nullptr, n, h, sh.v, sh.tp,
                                 sh.cm);
  for (int64_t t = 0; t < sh.s; ++t)
    for (int64_t bi = 0; bi < sh.b; ++bi)
      act.host_labels[t * sh.b + bi] = mb.labels[size_t(bi * sh.s + t)];
  copy_bytes(act.labels, act.host_labels.data(), size_t(n) * sizeof(int32_t));
  const bool grad = ctx.training && grads != nullptr;
  // --eod-mask-loss: each token's gradient factor (s, b), its mask times the
  // micro-batch's own normalization unless the loss is per token.
  const float* loss_scale = nullptr;
  if (!mb.loss_mask.empty()) {
    act.host_loss_scale.resize(size_t(n));
    const double whole = double(sh.b * sh.s_global);
    const float norm = ctx.per_token_loss ? 1.f
                       : mb.loss_tokens > 0 ? float(whole / double(mb.loss_tokens))
                                            : 0.f;
    for (int64_t t = 0; t < sh.s; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi)
        act.host_loss_scale[size_t(t * sh.b + bi)] = mb.loss_mask[size_t(bi * sh.s + t)] * norm;
    loss_scale = act.host_loss_scale.data();
  }
  // The gradient of the logits: in place, or (bf16) rounded once into dlogits16.
  const WriteView dlogits = ws.dlogits16 ? WriteView(ws.dlogits16) : WriteView(ws.logits);
  vocab_parallel_cross_entropy(act.losses, ws.logits, dlogits, act.labels, n, sh.v, sh.v_start,
                               sh.v * sh.tp.size(), grad ? ctx.grad_scale : 0.f,
                               {ws.ce_max, ws.ce_sum, ws.ce_target},
                               sh.tp.tp, loss_scale);
  if (grad)
    column_parallel_linear_backward(act.dlnf, grads->out, nullptr, ws.full_a, ws.full_b,
                                    dlogits, lnf, w.out, n, h, sh.v, sh.tp, sh.cm);
  // The losses to the host (a GPU run waits for its forward here), summed in order.
  copy_bytes(act.host_losses.data(), act.losses, size_t(n) * sizeof(float));
  double sum = 0;
  if (mb.loss_mask.empty()) {
    for (int64_t i = 0; i < n; ++i) sum += act.host_losses[size_t(i)];
  } else {
    for (int64_t t = 0; t < sh.s; ++t)
      for (int64_t bi = 0; bi < sh.b; ++bi)
        if (mb.loss_mask[size_t(bi * sh.s + t)] != 0.f) sum += act.host_losses[size_t(t * sh.b + bi)];
  }
  // Multi-token prediction (training only: it adds nothing to the reported loss).
  if (sh.mtp_depths > 0 && ctx.training) mtp_forward(w, grads, act, ws, sh, mb, ctx);
  return sum;
}

void gpt_backward(const GptWeights& w, const GptGrads& grads, GptActivations& act,
                  GptWorkspace& ws, const GptShapes& sh, const PassContext& ctx) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  // The weights each part reads (optim_grads_params gathers them again).
  auto need = [&](int64_t part) {
    if (ctx.params_needed) (*ctx.params_needed)(part);
  };
  if (sh.has_output) {
    need(sh.total_layers);
    // The MTP depths first: they add the gradient of the final norm's output to act.dlnf.
    if (sh.mtp_depths > 0) mtp_backward(w, grads, act, ws, sh, ctx);
    fill_zero(ws.dres, size_t(nl * h) * sizeof(float));
    const ReadView last = act.hidden.at(sh.num_layers * nl * h);
    norm_backward(sh, ws.dres, grads.lnf.w, grads.lnf.b, act.dlnf, last, w.lnf.w, act.lnf_mean,
                  act.lnf_rstd, nl);
    if (ctx.grads_ready) (*ctx.grads_ready)(sh.total_layers);
  }  // else the caller has put the gradient from the next stage into ws.dres
  for (int64_t l = sh.num_layers - 1; l >= 0; --l) {
    const int64_t group = sh.recompute_group.empty() ? -1 : sh.recompute_group[size_t(l)];
    if (group >= 0 && (l + 1 == sh.num_layers || sh.recompute_group[size_t(l + 1)] != group)) {
      // Last layer of a recomputed group: re-run the group's forward first.
      const PassContext again = ctx.recomputing();
      for (int64_t r = group; r <= l; ++r) {
        need(sh.layer_begin + r);
        layer_forward(w.layers[size_t(r)], act.layers[size_t(r)], ws, sh, sh.layer_begin + r,
                      act.sample0, act.docs, again);
      }
    }
    need(sh.layer_begin + l);
    layer_backward(w.layers[size_t(l)], grads.layers[size_t(l)], act.layers[size_t(l)], ws, sh,
                   sh.layer_begin + l, act.sample0, act.docs, ctx);
    if (ctx.grads_ready) (*ctx.grads_ready)(sh.layer_begin + l);
  }
  if (sh.has_embedding) {
    hidden_dropout_backward(sh, ws.dln, ws.dres,
                            hidden_dropout_spec(sh, ctx, "embedding", act.sample0));
    if (sh.learned_positions)
      embedding_backward(grads.wpe, ws.dln, act.positions + sh.t0 * sh.b, nl, h, 0, sh.max_pos);
    vocab_parallel_embedding_backward(grads.wte, ws.full_a, ws.dln, act.ids, n, h, sh.v_start,
                                      sh.v, sh.tp);
    if (ctx.grads_ready) (*ctx.grads_ready)(-1);
  }
}

}  // namespace mt
