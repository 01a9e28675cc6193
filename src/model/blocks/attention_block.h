// The self-attention block (Megatron core's self_attention): column-parallel
// QKV (query groups split over TP), RoPE on q and k, the attention core (the
// context-parallel ring with CP), row-parallel output projection. Its output
// is the projection's, before the residual's dropout-add (the layer's).
#pragma once
#include <cstdint>
#include <string>

#include "model/blocks/block.h"

namespace mt {

template <class P>
struct AttentionParams {
  P qkv_w{};   // ((a + 2g)·d/tp, h)   rows: (g_local, a/g + 2, d)
  P qkv_b{};   // ((a + 2g)·d/tp)
  P proj_w{};  // (h, h/tp)
  P proj_b{};  // (h)
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
// (biases unless --disable-bias-linear); prefix "decoder.layers.<l>.self_attention.".
void attention_param_specs(ParamRegistry& reg, const std::string& prefix);

template <class P>
AttentionParams<P> bind_attention(const ParamBinder<P>& bind, const std::string& prefix) {
  return {bind.at(prefix + "linear_qkv.weight"), bind.maybe(prefix + "linear_qkv.bias"),
          bind.at(prefix + "linear_proj.weight"), bind.maybe(prefix + "linear_proj.bias")};
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

// --- Decoding (model/gpt_decoder.h): the same block over one new token whose
// query sits at position `pos`, an offset into this layer's key/value cache.

// One layer's cache: keys (after RoPE) and values of past positions, one per
// query group of this rank.
struct KvCache {
  float* k = nullptr;    // (capacity, g·d)
  float* v = nullptr;    // (capacity, g·d)
  int64_t capacity = 0;  // positions
};

// One token's scratch, shared by the layers.
struct AttentionDecodeWorkspace {
  float* qkv = nullptr;     // ((a + 2g)·d)  rows (g_local, a/g + 2, d)
  float* q = nullptr;       // (a·d)
  float* ctx = nullptr;     // (a·d)
  float* scores = nullptr;  // (capacity)
};
AttentionDecodeWorkspace carve_attention_decode_workspace(Arena& arena, const GptShapes& sh,
                                                          int64_t capacity);
// Floats of that workspace, from the sizes alone (hl = a·d, kvl = g·d on this rank).
double attention_decode_workspace_floats(double hl, double kvl, double capacity);

// out (h) = the projection's output (all-reduced over TP) for the token whose
// norm output is `in` (h); its key and value are written at row `pos` of the
// cache, and its query attends to rows [0, pos].
void attention_block_decode(float* out, const KvCache& cache, AttentionDecodeWorkspace& ws,
                            const float* in, const AttentionParams<ReadView>& w,
                            const GptShapes& sh, int64_t pos);

}  // namespace mt
