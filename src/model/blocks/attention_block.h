// The self-attention block (Megatron core's self_attention): column-parallel
// QKV (query groups split over TP), with --qk-layernorm a norm over each
// head's q and k (q_layernorm / k_layernorm: weights of the head size d,
// shared by the heads, TP-replicated), RoPE on q and k, the attention core
// (the context-parallel ring with CP), row-parallel output projection. Its
// output is the projection's, before the residual's dropout-add (the layer's).
// The head size d is --kv-channels (default h/a): QKV is ((a + 2g)·d, h) and
// the projection (h, a·d).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/blocks/block.h"

namespace mt {

template <class P>
struct AttentionParams {
  P qkv_w{};   // ((a + 2g)·d/tp, h)   rows: (g_local, a/g + 2, d)
  P qkv_b{};   // ((a + 2g)·d/tp)   unless --disable-bias-linear without --add-qkv-bias
  P proj_w{};  // (h, a·d/tp)
  P proj_b{};  // (h)
  P q_norm_w{}, q_norm_b{};  // (d)  --qk-layernorm (the bias with LayerNorm only)
  P k_norm_w{}, k_norm_b{};  // (d)
};

// Saved for backward (bf16 values in bf16 runs; lse stays fp32).
struct AttentionRecord {
  ReadView in;           // (s_local, b, h)  the norm's output (the layer sets it)
  WriteView q;           // (b, a, s, d)   after RoPE
  WriteView k;           // (b, a, s, d)   after RoPE, repeated for a group's heads
  WriteView v;           // (b, a, s, d)
  float* ctx = nullptr;  // (b, a, s, d)   attention output; fp32 runs only (bf16:
                         //                workspace, the bf16 backward does not read it)
  float* lse = nullptr;  // (b, a, s)      softmax log-sum-exp
  WriteView ctx_sbh;     // (s, b, a·d)    projection input
  // --qk-layernorm: the norms' inputs (q and k as projected) and statistics.
  WriteView q_in;             // (b, a, s, d)
  WriteView k_in;             // (b, a, s, d)   repeated for a group's heads, as k
  float* q_mean = nullptr;    // (b, a, s)      LayerNorm only
  float* q_rstd = nullptr;    // (b, a, s)
  float* k_mean = nullptr;    // (b, a, s)      LayerNorm only
  float* k_rstd = nullptr;    // (b, a, s)
};

// Scratch shared by every layer and micro-batch.
struct AttentionWorkspace {
  float* qkv = nullptr;       // (s, b, (a + 2g)·d)  forward: QKV output; backward: its gradient
  float* attn = nullptr;      // attention_workspace_floats (the CP ring's with CP)
  float* dq = nullptr;        // (b, a, s, d)  bf16 forward: fp32 q, k, v before their
  float* dk = nullptr;        // (b, a, s, d)  RoPE and rounding into the record
  float* dv = nullptr;        // (b, a, s, d)
  float* dctx = nullptr;      // (b, a, s, d)  bf16 forward: the attention output (fp32)
  float* dctx_sbh = nullptr;  // (s, b, a·d)
};

// Adds <prefix>linear_qkv.{weight,bias}, <prefix>linear_proj.{weight,bias}
// (biases unless --disable-bias-linear; the QKV bias also with --add-qkv-bias),
// and with --qk-layernorm <prefix>{q,k}_layernorm.weight (and .bias for
// LayerNorm); prefix "decoder.layers.<l>.self_attention.".
void attention_param_specs(ParamRegistry& reg, const std::string& prefix);

template <class P>
AttentionParams<P> bind_attention(const ParamBinder<P>& bind, const std::string& prefix) {
  return {bind.at(prefix + "linear_qkv.weight"),    bind.maybe(prefix + "linear_qkv.bias"),
          bind.at(prefix + "linear_proj.weight"),   bind.maybe(prefix + "linear_proj.bias"),
          bind.maybe(prefix + "q_layernorm.weight"), bind.maybe(prefix + "q_layernorm.bias"),
          bind.maybe(prefix + "k_layernorm.weight"), bind.maybe(prefix + "k_layernorm.bias")};
}

AttentionRecord carve_attention_record(Arena& arena, const GptShapes& sh);
AttentionWorkspace carve_attention_workspace(Arena& arena, const GptShapes& sh);
// Bytes of one AttentionRecord and of the AttentionWorkspace (see the .cc).
double attention_record_bytes(const BlockSizes& z);
double attention_workspace_bytes(const BlockSizes& z);
// Training FLOPs (forward and backward) of the block over `tokens` tokens,
// as Megatron-LM's num_floating_point_operations counts them.
double attention_flops(const ModelConfig& c, double tokens);

// out (s_local, b, h) = the projection's output (reduced, or reduce-scattered with SP).
void attention_block_forward(float* out, AttentionRecord& rec, AttentionWorkspace& ws,
                             const AttentionParams<ReadView>& w, const BlockCall& call);
// din (s_local, b, h) =; weight gradients +=. dout (s_local, b, h): gradient of out.
void attention_block_backward(float* din, const AttentionParams<float*>& g, const float* dout,
                              const AttentionRecord& rec, AttentionWorkspace& ws,
                              const AttentionParams<ReadView>& w, const BlockCall& call);

// --- Decoding (model/batched_decoder.h): the same block over R new tokens
// (DecodeRow: each of its own sequence, position and cache).

// One layer's cache: keys (after RoPE) and values of this rank's query groups,
// in a pool of blocks the sequences share (DecodeRow says which are whose).
struct KvCache {
  float* k = nullptr;      // (blocks, block_size, g·d)
  float* v = nullptr;      // (blocks, block_size, g·d)
  int64_t block_size = 0;  // rows of a block
};

// One step's scratch, shared by the layers.
struct AttentionDecodeWorkspace {
  float* qkv = nullptr;     // (R, (a + 2g)·d)  rows (g_local, a/g + 2, d)
  float* q = nullptr;       // (R, a·d)
  float* ctx = nullptr;     // (R, a·d)
  float* scores = nullptr;  // (span)
  float* mean = nullptr;    // (R·a)  --qk-layernorm's statistics (mean: LayerNorm only)
  float* rstd = nullptr;    // (R·a)
};
AttentionDecodeWorkspace carve_attention_decode_workspace(Arena& arena, const GptShapes& sh,
                                                          const DecodeDims& dims);
// Floats of that workspace on a rank of a TP group of `tp`, from the
// configuration alone.
double attention_decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims);

// out (R, h) = the projection's output (all-reduced over TP) for the tokens
// whose norm outputs are `in` (R, h). Every row's key and value are written
// at its position's slot first, then each query attends to its sequence's
// positions [max(0, pos - window), pos]: rows of one sequence in one step are
// causal among themselves.
void attention_block_decode(float* out, const KvCache& cache, AttentionDecodeWorkspace& ws,
                            const float* in, const AttentionParams<ReadView>& w,
                            const GptShapes& sh, std::span<const DecodeRow> rows);

// Self-attention as the default kind of the attention slot
// (model/blocks/block_kinds.h); its options (query groups, biases, q/k norms,
// RoPE, head size) are configuration.
struct SelfAttention {
  static constexpr const char* name = "self_attention";
  template <class P>
  using Params = AttentionParams<P>;
  using Record = AttentionRecord;
  using Workspace = AttentionWorkspace;
  using DecodeWorkspace = AttentionDecodeWorkspace;
  using Cache = KvCache;
  using Shapes = NoShapes;
  static bool applies(const ModelConfig&, int64_t) { return true; }
  static Shapes make_shapes(const ModelConfig&, const StageLayout&, const GptShapes&,
                            const Communicator*) {
    return {};
  }
  static void param_specs(ParamRegistry& reg, const std::string& prefix) {
    attention_param_specs(reg, prefix);
  }
  template <class P>
  static Params<P> bind(const ParamBinder<P>& b, const std::string& prefix) {
    return bind_attention(b, prefix);
  }
  static Record carve_record(Arena& a, const GptShapes& sh, const LayerSpec&) {
    return carve_attention_record(a, sh);
  }
  static Workspace carve_workspace(Arena& a, const GptShapes& sh) {
    return carve_attention_workspace(a, sh);
  }
  static double record_bytes(const BlockSizes& z, const LayerSpec&) {
    return attention_record_bytes(z);
  }
  static double workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>&) {
    return attention_workspace_bytes(z);
  }
  static double flops(const ModelConfig& c, double tokens) { return attention_flops(c, tokens); }
  // QKV and the output projection, TP-split (the attention core is priced
  // apart, at the device's attention rate).
  static void plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops);
  static double plan_exchange_elements(const ModelConfig&, const PlanDims&) { return 0; }
  static double plan_recompute(const ModelConfig&, const PlanDims&, const LayerSpec&,
                               std::vector<double>&) {
    return 0;  // (core_attn: always recomputed, priced in the backward's core)
  }
  // The features of a head the attention core's two products run over.
  static double plan_core_head_dim(const ModelConfig& c) { return double(c.head_dim()); }
  static void forward(float* out, Record& rec, const Params<ReadView>& w, Workspace& ws,
                      const BlockCall& call) {
    attention_block_forward(out, rec, ws, w, call);
  }
  static void backward(float* din, const Params<float*>& g, const float* dout, const Record& rec,
                       Workspace& ws, const Params<ReadView>& w, const BlockCall& call) {
    attention_block_backward(din, g, dout, rec, ws, w, call);
  }
  static DecodeWorkspace carve_decode_workspace(Arena& a, const GptShapes& sh,
                                                const DecodeDims& dims) {
    return carve_attention_decode_workspace(a, sh, dims);
  }
  static double decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims) {
    return attention_decode_workspace_floats(c, tp, dims);
  }
  // One layer's pool of keys and values (this rank's query groups).
  static Cache carve_cache(Arena& a, const GptShapes& sh, const KvPoolDims& pool);
  static double cache_floats(const ModelConfig& c, int64_t tp, double rows);
  static void decode(float* out, const Cache& cache, DecodeWorkspace& ws, const float* in,
                     const Params<ReadView>& w, const GptShapes& sh,
                     std::span<const DecodeRow> rows) {
    attention_block_decode(out, cache, ws, in, w, sh, rows);
  }
};

}  // namespace mt
