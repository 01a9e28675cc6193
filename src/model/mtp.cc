// Multi-token prediction: its parameters, records, workspace, memory and
// FLOP formulas, and the shifted targets (the pass is model/mtp_pass.cc).
#include "model/mtp.h"

#include "backend/device.h"

namespace mt {

std::string mtp_prefix(int64_t depth) { return "mtp.layers." + std::to_string(depth) + "."; }

LayerSpec mtp_layer_spec(const ModelConfig& c) { return layer_spec(c, c.num_layers - 1); }

void mtp_param_specs(ParamRegistry& reg) {
  const ModelConfig& c = reg.config();
  const int64_t h = c.hidden_size;
  for (int64_t d = 0; d < c.mtp_num_layers; ++d) {
    const std::string p = mtp_prefix(d);
    norm_param_specs(reg, p + "enorm");
    norm_param_specs(reg, p + "hnorm");
    // Megatron's ColumnParallelLinear(2h, h, init_method, bias=False): rows split over TP.
    reg.add(p + "eh_proj.weight", h, 2 * h, 2, 0, Init::kNormal, c.init_method_std, true);
    const size_t first = reg.params().size();
    layer_param_specs_at(reg, p + "transformer_layer.", mtp_layer_spec(c));
    reg.set_layer(first, c.num_layers + d);  // its expert bias's loads (train/train_step.cc)
    norm_param_specs(reg, p + "final_layernorm");
  }
}

MtpActivations carve_mtp_record(Arena& arena, const GptShapes& sh) {
  MtpActivations act;
  if (!sh.has_output || sh.mtp_depths == 0) return act;
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  const LayerSpec spec = sh.mtp_spec;
  auto stats = [&](float*& mean, float*& rstd) {
    if (!sh.rms_norm) mean = arena.alloc_f32(nl);
    rstd = arena.alloc_f32(nl);
  };
  for (int64_t d = 0; d < sh.mtp_depths; ++d) {
    MtpDepthRecord r;
    r.ids = static_cast<int32_t*>(arena.alloc(DType::kF32, {n}).data);  // 4-byte slots
    r.labels = static_cast<int32_t*>(arena.alloc(DType::kF32, {n}).data);
    r.losses = arena.alloc_f32(n);
    r.emb = alloc_act(arena, sh, nl * h);
    stats(r.emean, r.erstd);
    // Depth d's input is depth d-1's output (depth 0's: a copy of the main final norm's).
    r.hin = d == 0 ? alloc_act(arena, sh, nl * h) : act.depths.back().out;
    stats(r.hmean, r.hrstd);
    r.cat = alloc_act(arena, sh, nl * 2 * h);
    r.layer = carve_layer_record(arena, sh, spec);
    r.layer.input = alloc_act(arena, sh, nl * h);
    r.layer.output = alloc_act(arena, sh, nl * h);
    stats(r.fmean, r.frstd);
    r.out = alloc_act(arena, sh, nl * h);
    r.dout = arena.alloc_f32(nl * h);
    if (!arena.counting()) {
      r.host_ids.resize(size_t(n));
      r.host_labels.resize(size_t(n));
      r.host_losses.resize(size_t(n));
      r.host_scale.resize(size_t(n));
      r.host_mask.resize(size_t(n));
    }
    act.depths.push_back(std::move(r));
  }
  return act;
}

MtpWorkspace carve_mtp_workspace(Arena& arena, const GptShapes& sh) {
  MtpWorkspace ws;
  if (!sh.has_output || sh.mtp_depths == 0) return ws;
  const int64_t n = sh.tokens(), nl = sh.local_tokens(), h = sh.h;
  ws.cat_full = arena.alloc_f32(n * 2 * h);
  ws.dcat_full = arena.alloc_f32(n * 2 * h);
  ws.dcat = arena.alloc_f32(nl * 2 * h);
  ws.proj = arena.alloc_f32(n * (h / sh.tp.size()));
  ws.dh = arena.alloc_f32(nl * h);
  ws.carry = arena.alloc_f32(nl * h);
  return ws;
}

double mtp_record_bytes(const BlockSizes& z, const LayerSpec& spec, int64_t depths) {
  if (depths == 0) return 0;
  const double slab = z.e * z.nl * z.h, stats = 4 * z.stats * z.nl;
  // ids, labels, losses; emb, cat (2h), the layer's input and output, h_k;
  // three norms' statistics; d h_k (fp32); the layer's own record.
  const double depth = 3 * 4 * z.n + 6 * slab + 3 * stats + 4 * z.nl * z.h +
                       layer_record_bytes(z, spec);
  return double(depths) * depth + slab;  // + depth 0's copy of h_0
}

double mtp_workspace_bytes(const BlockSizes& z, int64_t depths, int64_t tp) {
  if (depths == 0) return 0;
  // cat_full, dcat_full (n, 2h); dcat (nl, 2h); proj (n, h/tp); dh, carry (nl, h): fp32.
  return 4 * (2 * z.n * 2 * z.h + z.nl * 2 * z.h + z.n * z.h / double(tp) + 2 * z.nl * z.h);
}

double mtp_flops(const ModelConfig& c, double tokens) {
  if (!c.mtp()) return 0;
  const double h = double(c.hidden_size), v = double(c.padded_vocab_size);
  // Megatron: 3 (fwd + bwd) x 2 (FMA) x tokens x (3h norms + 2h^2 eh_proj + h·v logits)
  // per depth, plus the depth's layer (the last decoder layer's kind).
  const double per_depth = 6.0 * tokens * (3 * h + 2 * h * h + h * v) +
                           layer_flops(c, c.num_layers - 1, tokens);
  return double(c.mtp_num_layers) * per_depth;
}

void mtp_fill_targets(MtpActivations& rec, const GptShapes& sh, const MicroBatchInput& mb,
                      bool per_token_loss, std::vector<double>& counted) {
  const int64_t sg = sh.s_global, b = sh.b, n = sh.tokens();
  // The whole samples (b, s_global): with CP the data loader's copies, else
  // this rank's tokens are whole.
  const bool whole = !mb.sample_tokens.empty();
  MT_CHECK(whole || sh.cp.size() == 1, "MTP with context parallelism needs the whole samples "
           "(MicroBatchInput::sample_tokens; internal error)");
  const std::vector<int32_t>& tokens = whole ? mb.sample_tokens : mb.tokens;
  const std::vector<int32_t>& labels = whole ? mb.sample_labels : mb.labels;
  const std::vector<float>& mask = whole ? mb.sample_loss_mask : mb.loss_mask;
  MT_CHECK(int64_t(tokens.size()) == b * sg && int64_t(labels.size()) == b * sg &&
               (mask.empty() || int64_t(mask.size()) == b * sg),
           "MTP targets: samples of ", tokens.size(), " tokens for a micro-batch of ", b, " x ",
           sg, " (internal error)");
  const double all = mask.empty() ? double(b * sg) : double(mb.loss_tokens);
  counted.assign(size_t(sh.mtp_depths), 0.0);
  for (int64_t d = 0; d < sh.mtp_depths; ++d) {
    const int64_t k = d + 1;  // shift
    double count = 0;  // the shifted mask over the whole micro-batch
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t p = k; p < sg; ++p) count += mask.empty() ? 1.0 : mask[size_t(bi * sg + p)];
    counted[size_t(d)] = count;
    // Megatron's process_mtp_loss: scale / D over the shifted count; the
    // main loss's grad_scale (PassContext) carries 1 / (b·s/CP) per
    // micro-batch, or per token 1 / the iteration's counted tokens, where
    // Megatron re-weighs by the micro-batch's own count over the shifted one.
    const double weight = count > 0 ? double(sh.mtp_scale) / double(sh.mtp_depths) *
                                          (per_token_loss ? all : double(b * sg)) / count
                                    : 0.0;
    MtpDepthRecord& r = rec.depths[size_t(d)];
    for (int64_t t = 0; t < sh.s; ++t) {
      const int64_t p = sh.global_position(t) + k;  // the source position
      for (int64_t bi = 0; bi < b; ++bi) {
        const size_t i = size_t(t * b + bi), src = size_t(bi * sg + p);
        const bool in = p < sg;
        r.host_ids[i] = in ? tokens[src] : 0;
        r.host_labels[i] = in ? labels[src] : 0;
        r.host_mask[i] = in ? (mask.empty() ? 1.f : mask[src]) : 0.f;
        r.host_scale[i] = float(r.host_mask[i] * weight);
      }
    }
    copy_bytes(r.ids, r.host_ids.data(), size_t(n) * sizeof(int32_t));
    copy_bytes(r.labels, r.host_labels.data(), size_t(n) * sizeof(int32_t));
  }
}

}  // namespace mt
