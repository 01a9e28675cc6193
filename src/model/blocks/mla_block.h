// Multi-latent attention (DeepSeek-V2/V3; Megatron core's MLASelfAttention),
// a kind of the attention slot (model/blocks/block_kinds.h). Per token:
//   q   = x W_q (no --q-lora-rank), or norm(x W_q_down) W_q_up: (a, dqk + dpe)
//   kv  = x W_kv_down: a latent c (r_kv) and a key part k_pe (dpe) shared by the heads
//   k_nope | v = norm(c) W_kv_up: (a, dqk + dv)
//   k   = [k_nope, rope(k_pe)],  q = [q_nope, rope(q_pe)]
// the latent norms (q_layernorm, kv_layernorm) with --qk-layernorm only (of
// --normalization's kind), as Megatron's spec. RoPE is Megatron's MLA rotation
// (mla_rotary_interleaved: the pe features' even/odd pairs are rotated, and
// left in the order [evens, odds]), plain or YaRN (--rope-type, default
// yarn). Softmax scale mscale² / sqrt(dqk + dpe), mscale = YaRN's
// yarn_mscale(--rotary-scaling-factor, --mscale-all-dim).
//
// TP splits the heads: linear_q_proj / linear_q_up_proj and
// linear_kv_up_proj are column-parallel, linear_proj row-parallel; the
// down-projections (and the latent norms) are replicated and run on the whole
// sequence (all-gathered under SP). Each rank's gradients of them and of the
// block's input are partial sums over its heads: the weights' are summed over
// TP with the replicated ones (ParamSpec::tp_partial_grad), the input's
// all-reduced (reduce-scattered under SP) at the end of backward. CP: the
// ring over the per-head k and v after the up-projection. The attention core
// runs on q, k heads of dqk + dpe features and v, ctx heads of dv (no padding).
// bf16 runs: the GEMMs in bf16, the saved latents, q, k, v and the
// projection's input bf16 (as the standard block's).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/rope.h"
#include "model/blocks/block.h"

namespace mt {

// The kind's sizes on a rank (GptShapes::kinds).
struct MlaShapes {
  int64_t a = 0;                    // heads on this rank
  int64_t rq = 0, rkv = 0;          // q latent (0: a plain q projection), kv latent
  int64_t dqk = 0, dpe = 0, dv = 0;
  int64_t dq() const { return dqk + dpe; }
  bool norm = false;                // --qk-layernorm: the latents' norms
  float softmax_factor = 1.f;       // mscale²
  std::shared_ptr<const RopeTable> rope;  // (positions, dpe/2), YaRN's cos/sin scaled
};
const MlaShapes& mla_of(const GptShapes& sh);

template <class P>
struct MlaParams {
  P q_w{};        // linear_q_proj (a·dq/tp, h), without --q-lora-rank
  P q_down_w{};   // linear_q_down_proj (rq, h)           replicated
  P q_norm_w{}, q_norm_b{};  // q_layernorm (rq)         replicated
  P q_up_w{};     // linear_q_up_proj (a·dq/tp, rq)
  P kv_down_w{};  // linear_kv_down_proj (rkv + dpe, h)   replicated
  P kv_norm_w{}, kv_norm_b{};  // kv_layernorm (rkv)     replicated
  P kv_up_w{};    // linear_kv_up_proj (a·(dqk + dv)/tp, rkv)   rows per head: k_nope, v
  P proj_w{};     // linear_proj (h, a·dv/tp)
  P proj_b{};     // (h)
};

// Saved for backward (bf16 values in bf16 runs; statistics, ctx and lse fp32).
struct MlaRecord {
  ReadView in;              // (s_local, b, h)  the norm's output (the layer sets it)
  WriteView cq;             // (n, rq)   q latent (the norm's input)
  WriteView cqn;            // (n, rq)   normed (= cq without the norms)
  WriteView ckv;            // (n, rkv)  kv latent
  WriteView ckvn;           // (n, rkv)  normed (= ckv without the norms)
  float* q_mean = nullptr;  // (n)  LayerNorm only
  float* q_rstd = nullptr;  // (n)
  float* kv_mean = nullptr;
  float* kv_rstd = nullptr;
  WriteView q, k;           // (b, a, s, dq)  after RoPE (q scaled by mscale²)
  WriteView v;              // (b, a, s, dv)
  float* ctx = nullptr;     // (b, a, s, dv)  fp32 in every run (CP's backward reads it)
  float* lse = nullptr;     // (b, a, s)
  WriteView ctx_sbh;        // (n, a·dv)  projection input
  // Megatron's "mla_up_proj" (LayerSpec::recompute_up_proj): q, k, v are not
  // kept (they live in MlaWorkspace::up_q, up_k, up_v) and are redone from
  // the kept latents and k_pe (fp32, as projected) before the backward.
  bool recompute_up = false;
  float* kpe = nullptr;     // (n, dpe)  recompute_up only
};

struct MlaWorkspace {
  float* q = nullptr;       // (n, a·dq)  q projection out / its gradient
  float* kv = nullptr;      // (n, a·(dqk + dv))  kv up-projection out / its gradient
  float* kpe = nullptr;     // (n, dpe)  k_pe as projected / its gradient
  float* dlat = nullptr;    // (n, max(rq, rkv))  a latent's gradient (normed side)
  float* dlat_in = nullptr; // (n, max(rq, rkv))  its gradient before the norm
  float* attn = nullptr;    // the attention core's (or the CP ring's) scratch
  float* dq = nullptr;      // (b, a, s, dq)
  float* dk = nullptr;      // (b, a, s, dq)
  float* dv = nullptr;      // (b, a, s, dv)
  float* dctx = nullptr;    // (b, a, s, dv)
  float* dctx_sbh = nullptr;  // (n, a·dv)  projection input (gradient); CP: ctx as (s, b, a·dv)
  // q, k (b, a, s, dq) and v (b, a, s, dv) of the layers that recompute them
  // (mla_up_proj; sh.layer_specs), shared by those layers.
  WriteView up_q, up_k, up_v;
};

// Adds <prefix>{linear_q_proj | linear_q_down_proj, q_layernorm, linear_q_up_proj},
// linear_kv_down_proj, kv_layernorm, linear_kv_up_proj, linear_proj (.weight;
// norms' .bias with LayerNorm; linear_proj.bias unless --disable-bias-linear).
void mla_param_specs(ParamRegistry& reg, const std::string& prefix);

template <class P>
MlaParams<P> bind_mla(const ParamBinder<P>& b, const std::string& p) {
  return {b.maybe(p + "linear_q_proj.weight"),      b.maybe(p + "linear_q_down_proj.weight"),
          b.maybe(p + "q_layernorm.weight"),        b.maybe(p + "q_layernorm.bias"),
          b.maybe(p + "linear_q_up_proj.weight"),   b.at(p + "linear_kv_down_proj.weight"),
          b.maybe(p + "kv_layernorm.weight"),       b.maybe(p + "kv_layernorm.bias"),
          b.at(p + "linear_kv_up_proj.weight"),     b.at(p + "linear_proj.weight"),
          b.maybe(p + "linear_proj.bias")};
}

// recompute_up: without q, k, v (with k_pe); the workspace with up_q, up_k,
// up_v when an MLA layer of sh.layer_specs (or the formula's) recomputes them.
MlaRecord carve_mla_record(Arena& arena, const GptShapes& sh, bool recompute_up = false);
MlaWorkspace carve_mla_workspace(Arena& arena, const GptShapes& sh);
double mla_record_bytes(const BlockSizes& z, bool recompute_up = false);
double mla_workspace_bytes(const BlockSizes& z, bool recompute_up = false);
// Whether a layer of `specs` is an MLA one that recomputes its up-projections.
bool mla_recomputes_up(const std::vector<LayerSpec>& specs);
// Megatron-LM's num_floating_point_operations for MLA (training, forward and backward).
double mla_flops(const ModelConfig& c, double tokens);

void mla_block_forward(float* out, MlaRecord& rec, MlaWorkspace& ws,
                       const MlaParams<ReadView>& w, const BlockCall& call);
void mla_block_backward(float* din, const MlaParams<float*>& g, const float* dout,
                        const MlaRecord& rec, MlaWorkspace& ws, const MlaParams<ReadView>& w,
                        const BlockCall& call);

// --- Decoding (model/blocks/mla_decode.cc): the cache holds per token only
// the normed kv latent and the rotated k_pe (rkv + dpe floats a layer, on
// every TP rank); a step up-projects the keys and values of the positions
// its queries read.
struct MlaCache {
  float* latent = nullptr;  // (blocks, block_size, rkv + dpe)
  int64_t block_size = 0;
};
struct MlaDecodeWorkspace {
  float* q = nullptr;        // (R, a·dq)
  float* lat = nullptr;      // (2, R, max(rq, rkv) + dpe)  the rows' latents, raw and normed
  float* ctx = nullptr;      // (R, a·dv)
  float* seq_lat = nullptr;  // (span, rkv)  one sequence's cached latents, gathered
  float* kv = nullptr;       // (span, a·(dqk + dv))  ... up-projected: k_nope, v per head
  float* scores = nullptr;   // (span)
  float* stat = nullptr;     // (2 + dpe)  a norm's mean and rstd; a RoPE row
};
MlaDecodeWorkspace carve_mla_decode_workspace(Arena& a, const GptShapes& sh,
                                              const DecodeDims& dims);
double mla_decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims);
void mla_block_decode(float* out, const MlaCache& cache, MlaDecodeWorkspace& ws, const float* in,
                      const MlaParams<ReadView>& w, const GptShapes& sh,
                      std::span<const DecodeRow> rows);

struct MultiLatentAttention {
  static constexpr const char* name = "multi_latent_attention";
  template <class P>
  using Params = MlaParams<P>;
  using Record = MlaRecord;
  using Workspace = MlaWorkspace;
  using DecodeWorkspace = MlaDecodeWorkspace;
  using Cache = MlaCache;
  using Shapes = MlaShapes;
  static bool applies(const ModelConfig& c, int64_t) { return c.multi_latent_attention; }
  static Shapes make_shapes(const ModelConfig& c, const StageLayout& st, const GptShapes& sh,
                            const Communicator*);
  static void param_specs(ParamRegistry& reg, const std::string& prefix) {
    mla_param_specs(reg, prefix);
  }
  template <class P>
  static Params<P> bind(const ParamBinder<P>& b, const std::string& prefix) {
    return bind_mla(b, prefix);
  }
  static Record carve_record(Arena& a, const GptShapes& sh, const LayerSpec& spec) {
    return carve_mla_record(a, sh, spec.recompute_up_proj);
  }
  static Workspace carve_workspace(Arena& a, const GptShapes& sh) {
    return carve_mla_workspace(a, sh);
  }
  static double record_bytes(const BlockSizes& z, const LayerSpec& spec) {
    return mla_record_bytes(z, spec.recompute_up_proj);
  }
  static double workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>& specs) {
    return mla_workspace_bytes(z, mla_recomputes_up(specs));
  }
  static double flops(const ModelConfig& c, double tokens) { return mla_flops(c, tokens); }
  static void plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops);
  static double plan_exchange_elements(const ModelConfig&, const PlanDims&) { return 0; }
  // mla_up_proj: the q (up-)projection and the kv up-projection again, and
  // the per-head q, k, v re-laid out and rotated.
  static double plan_recompute(const ModelConfig& c, const PlanDims& d, const LayerSpec& spec,
                               std::vector<double>& flops);
  // The core's two products run over dqk + dpe features a head (the values padded).
  static double plan_core_head_dim(const ModelConfig& c) {
    return double(c.qk_head_dim + c.qk_pos_emb_head_dim);
  }
  static void forward(float* out, Record& rec, const Params<ReadView>& w, Workspace& ws,
                      const BlockCall& call) {
    mla_block_forward(out, rec, ws, w, call);
  }
  static void backward(float* din, const Params<float*>& g, const float* dout, const Record& rec,
                       Workspace& ws, const Params<ReadView>& w, const BlockCall& call) {
    mla_block_backward(din, g, dout, rec, ws, w, call);
  }
  static DecodeWorkspace carve_decode_workspace(Arena& a, const GptShapes& sh,
                                                const DecodeDims& dims) {
    return carve_mla_decode_workspace(a, sh, dims);
  }
  static double decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims) {
    return mla_decode_workspace_floats(c, tp, dims);
  }
  static Cache carve_cache(Arena& a, const GptShapes& sh, const KvPoolDims& pool);
  static double cache_floats(const ModelConfig& c, int64_t tp, double rows);
  static void decode(float* out, const Cache& cache, DecodeWorkspace& ws, const float* in,
                     const Params<ReadView>& w, const GptShapes& sh,
                     std::span<const DecodeRow> rows) {
    mla_block_decode(out, cache, ws, in, w, sh, rows);
  }
};

}  // namespace mt
