// megatron/block.h — a user's own MLP block kind, registered at run time.
//
// The library's block kinds are a compile-time list (dense MLP, MoE); one
// more kind of that list, "registered", forwards to the blocks a program
// registers here by name. A model takes the registered block in every dense
// layer when its config says so: ModelConfig's mlp_kind, the flag
// `--mlp-kind NAME` of `megatron train` (an MoE layer keeps its MoE block).
//
// A block declares its parameters (global shapes and the dimension tensor
// parallelism splits: Megatron's partition_dim), the floats it saves for
// backward and the scratch it needs, its FLOPs, and its forward and backward
// over one micro-batch. The library owns the memory (planned once, as for its
// own blocks), initialises the parameters (keyed by name and global index, so
// any layout draws the same model), reduces the gradients over data
// parallelism, shards them under ZeRO, saves and loads them.
//
// Tensor and sequence parallelism: a block's input and output are this rank's
// rows of the residual stream (all rows, or the rank's slab of the sequence
// with sequence parallelism). It reaches the other ranks only through the
// BlockPass helpers, Megatron's ColumnParallelLinear and RowParallelLinear:
// a column-parallel linear reads the block's input (all-gathered first under
// sequence parallelism) and gives every token's output rows of this rank's
// shard of the weight (partition_dim 0); a row-parallel linear takes such
// rows and a weight split by columns (partition_dim 1), sums the partial
// products over TP (reduce-scatters them into the slab under sequence
// parallelism) and adds its bias once. Between the two, the block computes on
// its shard alone. A TP-replicated parameter (partition_dim -1) may be a
// row-parallel linear's bias only (under sequence parallelism its gradient is
// then summed over TP by the library, as Megatron's are).
//
// Precision: registered blocks run in fp32 (a --bf16 or --fp16 run that
// takes one is refused); decoding (generate, serve) does not take them yet.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megatron {

// One parameter of a block, named under its layer's "decoder.layers.<l>.mlp.".
struct ParamDecl {
  enum class Init { kNormal, kZeros, kOnes };
  std::string name;        // e.g. "linear_gate.weight"
  int64_t rows = 0;        // global shape (rows, cols); cols 1: a vector
  int64_t cols = 1;
  int partition_dim = -1;  // over TP: -1 replicated, 0 rows split, 1 columns split
  Init init = Init::kNormal;
  float init_std = 0.f;    // kNormal: 0 takes the model's --init-method-std
  // kNormal with init_std 0: Megatron's output-layer init, std / sqrt(2 L)
  // (the projection back to the residual stream).
  bool output_layer = false;
};

// The sizes a block is planned by, on this rank.
struct BlockDims {
  int64_t hidden = 0;        // h: the residual stream's width
  int64_t ffn_hidden = 0;    // the model's --ffn-hidden-size (global)
  int64_t tp_size = 1;       // tensor-parallel ranks
  int64_t tp_rank = 0;
  int64_t tokens = 0;        // n: tokens of a micro-batch on this rank (s · b)
  int64_t local_tokens = 0;  // rows of the block's input and output (n / tp with SP)
};

// A parameter's local shard, as the block reads it: (rows, cols) row-major.
struct Weight {
  const float* data = nullptr;
  int64_t rows = 0, cols = 1;
};

namespace detail {
struct PassState;  // the library's side of a BlockPass
}

// One forward or backward of a block in one layer and micro-batch: its
// parameters (by their index in params()), its memory, and the parallel linears.
class BlockPass {
 public:
  explicit BlockPass(const detail::PassState* s) : s_(s) {}
  const BlockDims& dims() const;
  int64_t layer() const;            // the global layer index
  Weight weight(size_t i) const;    // parameter i of params()
  float* grad(size_t i) const;      // its gradient (backward only; accumulate +=)
  // record_floats(dims()) floats: written in forward, read back in backward.
  float* record() const;
  float* workspace() const;         // workspace_floats(dims()) floats, shared by all layers

  // y (tokens, w.rows) = X · Wᵀ + b, X the block input x (local_tokens, w.cols)
  // gathered over TP under SP. Weight `w` split by rows (partition_dim 0),
  // bias `b` (its rows, split the same way) or -1 for none.          [y: =]
  void column_linear(float* y, const float* x, size_t w, int b = -1) const;
  // Its backward: dx (local_tokens, w.cols) +=, its weight and bias gradients +=;
  // dy (tokens, w.rows), x the forward's input.
  void column_linear_backward(float* dx, const float* dy, const float* x, size_t w,
                              int b = -1) const;
  // out (local_tokens, w.rows) = Σ_tp x · Wᵀ + b, x (tokens, w.cols) this rank's
  // columns. Weight `w` split by columns (partition_dim 1), bias replicated.  [out: =]
  void row_linear(float* out, const float* x, size_t w, int b = -1) const;
  // Its backward: dx (tokens, w.cols) =, its weight and bias gradients +=;
  // dout (local_tokens, w.rows), x the forward's input.
  void row_linear_backward(float* dx, const float* dout, const float* x, size_t w,
                           int b = -1) const;

 private:
  const detail::PassState* s_;
};

// A block kind of the MLP slot. One instance serves every layer (its state,
// if any, must not depend on the layer: the activations live in record()).
class MlpBlock {
 public:
  virtual ~MlpBlock() = default;
  // The parameters of one layer's block (global shapes; dims' token counts are 0).
  virtual std::vector<ParamDecl> params(const BlockDims& dims) const = 0;
  // Floats saved per layer and micro-batch for backward, and scratch floats.
  virtual int64_t record_floats(const BlockDims& dims) const = 0;
  virtual int64_t workspace_floats(const BlockDims& dims) const { return 0; }
  // Training FLOPs (forward and backward) of the whole block over `tokens`
  // tokens, all TP ranks together (the MFU the log prints; dims: tp_size 1).
  virtual double flops(const BlockDims& dims, double tokens) const = 0;
  // out (local_tokens, hidden) = the block of in (local_tokens, hidden).
  virtual void forward(float* out, const float* in, const BlockPass& pass) const = 0;
  // din (local_tokens, hidden), zeroed by the caller: += the gradient of the
  // input; parameter gradients +=. dout: the gradient of out; in: forward's input.
  virtual void backward(float* din, const float* dout, const float* in,
                        const BlockPass& pass) const = 0;
};

// Makes `block` the MLP of the models whose mlp_kind is `name` (every rank
// registers the same blocks, before it builds a model). Refuses an empty name,
// "dense", "moe", or a name taken.
void register_mlp_block(const std::string& name, std::shared_ptr<const MlpBlock> block);
// The names registered so far.
std::vector<std::string> registered_mlp_blocks();

}  // namespace megatron
