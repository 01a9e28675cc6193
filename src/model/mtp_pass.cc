// The MTP depths' forward (with each depth's fused loss head) and backward
// (model/mtp.h says what a depth computes). Under sequence parallelism the
// norms, dropout and the layer's residual stream run on this rank's slab, as
// in the decoder; eh_proj gathers its input over the sequence, and its
// output (a block of h/tp columns) is gathered over TP and cut back to the
// slab (Megatron's gather_from_tensor_model_parallel_region, then
// scatter_to_sequence_parallel_region).
#include <limits>

#include "backend/device.h"
#include "kernels/reduce.h"
#include "model/dropout_sites.h"
#include "model/gpt.h"
#include "parallel/mappings.h"
#include "parallel/vocab_parallel_cross_entropy.h"
#include "parallel/vocab_parallel_embedding.h"

namespace mt {

namespace {

std::string embedding_site(int64_t depth) { return "mtp" + std::to_string(depth) + ".embedding"; }

// cat (rows, 2h) = [a | b], each (rows, h) fp32, stored as cat is.
void concat_rows(WriteView cat, const float* a, const float* b, int64_t rows, int64_t h) {
  for (int64_t r = 0; r < rows; ++r) {
    convert(cat.at(r * 2 * h), a + r * h, h);
    convert(cat.at(r * 2 * h + h), b + r * h, h);
  }
}

// a, b (rows, h) = the halves of dcat (rows, 2h).
void split_rows(float* a, float* b, const float* dcat, int64_t rows, int64_t h) {
  for (int64_t r = 0; r < rows; ++r) {
    copy_bytes(a + r * h, dcat + r * 2 * h, size_t(h) * sizeof(float));
    copy_bytes(b + r * h, dcat + r * 2 * h + h, size_t(h) * sizeof(float));
  }
}

// eh_proj: out (s_local, b, h) = [e | h] · Wᵀ, W (h/tp, 2h) this rank's rows.
void eh_proj_forward(WriteView out, ReadView cat, ReadView w, GptWorkspace& ws,
                     const GptShapes& sh) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  const int64_t tp = sh.tp.size(), hl = h / tp;
  column_parallel_linear_forward(ws.mtp.proj, ws.mtp.cat_full, cat, w, nullptr, n, 2 * h, hl,
                                 sh.tp, sh.cm);
  // Every rank's block (tp, n, h/tp), then this rank's rows of the whole (n, h).
  const float* blocks = ws.mtp.proj;
  if (tp > 1) {
    sh.tp.tp->all_gather(ws.full_a, ws.mtp.proj, n * hl);
    blocks = ws.full_a;
  }
  const int64_t row0 = sh.t0 * sh.b;  // first row of the slab (0 without SP)
  for (int64_t i = 0; i < nl; ++i)
    for (int64_t r = 0; r < tp; ++r)
      convert(out.at(i * h + r * hl), blocks + (r * n + row0 + i) * hl, hl);
}

// dcat (s_local, b, 2h) = from dout (s_local, b, h); dW +=.
void eh_proj_backward(float* dcat, float* dw, const float* dout, ReadView cat, ReadView w,
                      GptWorkspace& ws, const GptShapes& sh) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  const int64_t tp = sh.tp.size(), hl = h / tp;
  // The gradient of the whole output (n, h): with SP all-gathered (the
  // scatter's backward); then this rank's columns (the TP gather's backward).
  const float* full = dout;
  if (sh.tp.sequence_parallel) {
    gather_from_sp_region_forward(ws.full_a, dout, nl * h, *sh.tp.tp);
    full = ws.full_a;
  }
  const int64_t c0 = sh.tp.tp ? int64_t(sh.tp.tp->rank()) * hl : 0;
  for (int64_t i = 0; i < n; ++i)
    copy_bytes(ws.mtp.proj + i * hl, full + i * h + c0, size_t(hl) * sizeof(float));
  column_parallel_linear_backward(dcat, dw, nullptr, ws.mtp.cat_full, ws.mtp.dcat_full,
                                  ws.mtp.proj, cat, w, n, 2 * h, hl, sh.tp, sh.cm);
}

// Megatron's _compute_mtp_acceptance_counts: the counted rows (mask != 0)
// whose label is the argmax of their logits (n, v_local), vocabulary-parallel
// (the global max over TP, then the smallest global index that reaches it).
// Adds to correct and total.
void count_accepted(double& correct, double& total, const float* logits,
                    const MtpDepthRecord& r, GptWorkspace& ws, const GptShapes& sh) {
  const int64_t n = sh.tokens(), v = sh.v;
  float* best = ws.ce_max;                         // (n) row max, then the global one
  int* index = reinterpret_cast<int*>(ws.ce_sum);  // (n) minus the global index of the argmax
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * v;
    int64_t arg = 0;
    for (int64_t j = 1; j < v; ++j)
      if (row[j] > row[arg]) arg = j;
    best[i] = row[arg];
    index[i] = -int(sh.v_start + arg);
  }
  if (sh.tp.size() > 1) {
    float* mine = reinterpret_cast<float*>(ws.ce_target);  // (n) this shard's row max
    copy_bytes(mine, best, size_t(n) * sizeof(float));
    sh.tp.tp->all_reduce_max(best, n);
    for (int64_t i = 0; i < n; ++i)
      if (mine[i] < best[i]) index[i] = std::numeric_limits<int>::min();  // another shard's
    sh.tp.tp->all_reduce_max(index, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (r.host_mask[size_t(i)] == 0.f) continue;
    total += 1;
    correct += -index[i] == r.host_labels[size_t(i)];
  }
}

}  // namespace

void mtp_forward(const GptWeights& w, const GptGrads* grads, GptActivations& act,
                 GptWorkspace& ws, const GptShapes& sh, const MicroBatchInput& mb,
                 const PassContext& ctx) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  if (ctx.params_needed) (*ctx.params_needed)(-1);  // the shared word embedding
  const bool grad = ctx.training && grads != nullptr;
  std::vector<double> counted;
  mtp_fill_targets(act.mtp, sh, mb, ctx.per_token_loss, counted);
  if (MtpStats* st = ctx.mtp_stats) {  // (sized by the caller; kept if so)
    const size_t depths = size_t(sh.mtp_depths);
    st->loss.resize(depths, 0.0);
    st->correct.resize(depths, 0.0);
    st->total.resize(depths, 0.0);
  }
  // h_0: the main final norm's output, still in ws.hbuf.
  convert(act.mtp.depths[0].hin, ws.hbuf, nl * h);
  for (int64_t d = 0; d < sh.mtp_depths; ++d) {
    const MtpParams<ReadView>& m = w.mtp[size_t(d)];
    MtpDepthRecord& r = act.mtp.depths[size_t(d)];
    // The depth's layer keys its dropout masks as a layer after the decoder's.
    const int64_t layer = sh.total_layers + d;
    // The shifted tokens' embedding, its dropout (Megatron's LanguageModelEmbedding).
    vocab_parallel_embedding_forward(ws.hbuf, ws.full_a, r.ids, w.wte, n, h, sh.v_start, sh.v,
                                     sh.tp);
    hidden_dropout_forward(sh, r.emb, ws.hbuf,
                           hidden_dropout_spec(sh, ctx, embedding_site(d), act.sample0));
    // [enorm(e) | hnorm(h)] → eh_proj → the layer → final norm = h_k.
    norm_forward(sh, ws.dln, r.emean, r.erstd, r.emb, m.enorm.w, m.enorm.b, nl);
    norm_forward(sh, ws.hbuf, r.hmean, r.hrstd, r.hin, m.hnorm.w, m.hnorm.b, nl);
    concat_rows(r.cat, ws.dln, ws.hbuf, nl, h);
    eh_proj_forward(r.layer.input, r.cat, m.eh_proj, ws, sh);
    layer_forward(m.layer, r.layer, ws, sh, layer, act.sample0, act.docs, ctx);
    norm_forward(sh, r.out, r.fmean, r.frstd, r.layer.output, m.final_norm.w, m.final_norm.b, nl);
    // The shared output layer and the cross-entropy against the shifted labels.
    column_parallel_linear_forward(ws.logits, ws.full_a, r.out, w.out, nullptr, n, h, sh.v, sh.tp,
                                   sh.cm);
    if (ctx.mtp_stats != nullptr)  // before the cross-entropy overwrites the logits
      count_accepted(ctx.mtp_stats->correct[size_t(d)], ctx.mtp_stats->total[size_t(d)],
                     ws.logits, r, ws, sh);
    const WriteView dlogits = ws.dlogits16 ? WriteView(ws.dlogits16) : WriteView(ws.logits);
    vocab_parallel_cross_entropy(r.losses, ws.logits, dlogits, r.labels, n, sh.v, sh.v_start,
                                 sh.v * sh.tp.size(), grad ? ctx.grad_scale : 0.f,
                                 {ws.ce_max, ws.ce_sum, ws.ce_target}, sh.tp.tp,
                                 r.host_scale.data());
    if (grad)
      column_parallel_linear_backward(r.dout, grads->out, nullptr, ws.full_a, ws.full_b, dlogits,
                                      r.out, w.out, n, h, sh.v, sh.tp, sh.cm);
    // The depth's token mean over the micro-batch (this rank's part with CP).
    copy_bytes(r.host_losses.data(), r.losses, size_t(n) * sizeof(float));
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      if (r.host_mask[size_t(i)] != 0.f) sum += double(r.host_mask[size_t(i)]) * r.host_losses[size_t(i)];
    if (ctx.mtp_stats != nullptr && counted[size_t(d)] > 0)
      ctx.mtp_stats->loss[size_t(d)] += sum / counted[size_t(d)];
  }
}

void mtp_backward(const GptWeights& w, const GptGrads& grads, GptActivations& act,
                  GptWorkspace& ws, const GptShapes& sh, const PassContext& ctx) {
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  const size_t slab = size_t(nl * h) * sizeof(float);
  if (ctx.params_needed) (*ctx.params_needed)(-1);
  MtpWorkspace& mw = ws.mtp;
  fill_zero(mw.carry, slab);  // d h_D from a next depth: none
  for (int64_t d = sh.mtp_depths - 1; d >= 0; --d) {
    const MtpParams<ReadView>& m = w.mtp[size_t(d)];
    const MtpParams<float*>& g = grads.mtp[size_t(d)];
    MtpDepthRecord& r = act.mtp.depths[size_t(d)];
    const int64_t layer = sh.total_layers + d;
    // d h_k: its own loss's part plus the next depth's (through its hnorm).
    copy_bytes(mw.dh, r.dout, slab);
    add_scaled_inplace(mw.dh, mw.carry, nl * h, 1.f);
    fill_zero(ws.dres, slab);
    norm_backward(sh, ws.dres, g.final_norm.w, g.final_norm.b, mw.dh, r.layer.output,
                  m.final_norm.w, r.fmean, r.frstd, nl);
    layer_backward(m.layer, g.layer, r.layer, ws, sh, layer, act.sample0, act.docs, ctx);
    eh_proj_backward(mw.dcat, g.eh_proj, ws.dres, r.cat, m.eh_proj, ws, sh);
    split_rows(ws.hbuf, ws.dln, mw.dcat, nl, h);  // d enorm(e), d hnorm(h)
    // enorm → dropout → the shared word embedding (its gradient +=).
    fill_zero(mw.dh, slab);
    norm_backward(sh, mw.dh, g.enorm.w, g.enorm.b, ws.hbuf, r.emb, m.enorm.w, r.emean, r.erstd,
                  nl);
    hidden_dropout_backward(sh, ws.hbuf, mw.dh,
                            hidden_dropout_spec(sh, ctx, embedding_site(d), act.sample0));
    vocab_parallel_embedding_backward(grads.wte, ws.full_a, ws.hbuf, r.ids, n, h, sh.v_start,
                                      sh.v, sh.tp);
    // hnorm → d h_{k-1}.
    fill_zero(mw.carry, slab);
    norm_backward(sh, mw.carry, g.hnorm.w, g.hnorm.b, ws.dln, r.hin, m.hnorm.w, r.hmean, r.hrstd,
                  nl);
  }
  add_scaled_inplace(act.dlnf, mw.carry, nl * h, 1.f);  // d h_0 joins the main loss's
}

}  // namespace mt
