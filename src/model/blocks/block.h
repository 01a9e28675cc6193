// What the blocks of a layer share (Megatron core's TransformerLayer is built
// from submodules: input_layernorm, self_attention, pre_mlp_layernorm, mlp).
// A block owns its parameter specs, a Params<P> struct of views bound by its
// own names, an activation record and its carve, its workspace and carve, a
// memory formula over BlockSizes, a FLOP count, forward and backward. This
// header holds the pieces common to all of them: the call context, the
// parameter binder, the saved-activation allocator and the formula's sizes.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "core/arena.h"
#include "model/gpt_shapes.h"
#include "model/params.h"

namespace mt {

struct KindShapes;  // model/blocks/block_kinds.h

// One block's forward or backward inside global layer `layer` of a micro-batch.
struct BlockCall {
  const GptShapes& sh;
  const PassContext& ctx;
  int64_t layer = 0;        // global layer index (keys the dropout masks)
  int64_t sample0 = 0;      // global index of the micro-batch's first sample
  float* full_a = nullptr;  // (s, b, h)  SP all-gathers, row-parallel partial sums
  float* full_b = nullptr;  // (s, b, h)  SP input gradient before its reduce-scatter
  TokenDocuments docs = {};  // the micro-batch's documents (positions, attention bounds)
};

// Makes views of type P (ReadView weights, float* gradients) at the offsets
// of the registry's parameters; a block binds its own names through it.
template <class P>
struct ParamBinder {
  const ParamRegistry& reg;
  std::function<P(int64_t)> view;  // the view at a float offset of the flat buffer
  P at(const std::string& name) const { return view(reg.get(name).offset); }
  // Parameters the configuration may leave out (biases, positions).
  P maybe(const std::string& name) const { return reg.has(name) ? at(name) : P{}; }
};

// GPT-2 / Megatron: the output projection of each block initialised with
// std / sqrt(2L).
inline float output_init_std(const ModelConfig& c) {
  const float std = c.init_method_std;
  return std / std::sqrt(2.0f * float(c.num_layers));
}

// A saved activation of n elements: bf16 in bf16 runs, else fp32.
WriteView alloc_act(Arena& arena, const GptShapes& sh, int64_t n);

// The local sizes a block's memory formula reads (element counts; bytes
// where said), made from the memory plan (memory/memory_report.cc).
struct BlockSizes {
  double n = 0;        // tokens of a micro-batch on this rank: (s/cp)·b
  double nl = 0;       // rows of the residual stream: n/tp with sequence parallelism
  double h = 0;        // hidden
  double hl = 0;       // attention width on this rank: a_local · head_dim (h/tp by default)
  double a = 0;        // heads on this rank
  double g = 0;        // query groups on this rank (a without GQA)
  double f = 0;        // ffn hidden on this rank
  double f_in = 0;     // fc1 outputs: f, or 2f with SwiGLU
  double stats = 2;    // norm statistics per row: mean and rstd (RMSNorm: rstd only)
  double e = 4;        // bytes of a saved value: 4, or 2 in bf16 runs
  bool bf16 = false;   // bf16 math
  bool swiglu = false;
  bool qk_norm = false;  // --qk-layernorm: the attention block's q/k norms
  int64_t b = 0;       // micro-batch
  int64_t kv = 0;      // keys (and queries) of one attention kernel call: s/cp, or a chunk with CP
  int64_t cp = 1;      // context-parallel size
  // The kinds' own sizes (model/blocks/block_kinds.h), e.g. the MoE block's
  // experts and worst-case routed rows; null: shapes made by hand in tests.
  const KindShapes* kinds = nullptr;
};

// --- Decoding (model/batched_decoder.h): a step feeds R rows, each a token
// of its own sequence at its own position; the keys and values of a sequence
// lie in fixed-size blocks of a pool shared by all (kernels/attention_decode.h).

// One row of a step: its position, and where its sequence's cache lies.
struct DecodeRow {
  int64_t pos = 0;                  // the token's position in its sequence
  const int32_t* table = nullptr;   // the sequence's blocks: slot s in table[s / block_size]
  int64_t ring = 0;                 // the sequence's slots: position p in slot p mod ring
};

// What a block's decode scratch is sized for.
struct DecodeDims {
  int64_t rows = 1;  // R: rows one step takes at most
  int64_t span = 1;  // keys one query reads at most (a sequence's positions, or a window's)
};

// The pool of one layer's cache: blocks of block_size rows.
struct KvPoolDims {
  int64_t blocks = 0;
  int64_t block_size = 0;
};

// A kind without sizes of its own.
struct NoShapes {};

// What plan's step-time model (plan/plan_time.cc) gives a block's
// plan_gemms / plan_exchange_elements: one micro-batch's tokens on a rank.
struct PlanDims {
  double n = 0;    // tokens of the micro-batch on this rank: (s/cp)·b
  double nl = 0;   // residual-stream rows: n/tp with sequence parallelism
  double h = 0;    // hidden
  double tp = 1;   // tensor-parallel size
  double ep = 1;   // expert-parallel size
};

}  // namespace mt
