// The MLP slot's kind for blocks a program registers at run time
// (include/megatron/block.h): a layer takes it when the model's mlp_kind
// names a registered block (`--mlp-kind`). It forwards each piece of the kind
// interface (model/blocks/block_kinds.h) to the block's virtual functions:
// parameter specs from its ParamDecls, a record and a workspace of the floats
// it asks for (fp32), its FLOPs; forward and backward through a BlockPass whose
// parallel linears are parallel/tensor_parallel_linear's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "megatron/block.h"
#include "model/blocks/block.h"

namespace mt {

// The block `mlp_kind` names; refuses a name no one registered, listing those that are.
const megatron::MlpBlock& registered_mlp_block(const std::string& mlp_kind);

// The parameters of one layer's registered block (--mlp-kind), unsharded, with
// MLP hidden size `ffn` (the model's count, model/config.h).
int64_t registered_mlp_parameters(const ModelConfig& c, int64_t ffn);

template <class P>
struct RegisteredParams {
  std::vector<P> views;  // in the order of the block's params()
};

struct RegisteredRecord {
  ReadView in;           // (s_local, b, h): the norm's output (the layer sets it)
  float* data = nullptr; // the block's record_floats
};

struct RegisteredWorkspace {
  float* data = nullptr;     // the block's workspace_floats
  float* scratch = nullptr;  // (s_local, b, h) a column-parallel linear's input gradient
};

struct RegisteredShapes {
  const megatron::MlpBlock* block = nullptr;  // null: no layer of the stage takes it
  megatron::BlockDims dims;                    // without token counts
  std::vector<megatron::ParamDecl> decls;      // its params(dims)
};

struct RegisteredMlp {
  static constexpr const char* name = "registered";
  static constexpr const char* recompute_module = "mlp";  // a dense MLP for --recompute-modules
  template <class P>
  using Params = RegisteredParams<P>;
  using Record = RegisteredRecord;
  using Workspace = RegisteredWorkspace;
  using DecodeWorkspace = NoShapes;
  using Shapes = RegisteredShapes;
  // Dense layers of a model whose mlp_kind is set (MoE layers keep theirs).
  static bool applies(const ModelConfig& c, int64_t) { return !c.mlp_kind.empty(); }
  static Shapes make_shapes(const ModelConfig& c, const StageLayout& st, const GptShapes&,
                            const Communicator*);
  static void param_specs(ParamRegistry& reg, const std::string& prefix);
  template <class P>
  static Params<P> bind(const ParamBinder<P>& b, const std::string& prefix) {
    Params<P> p;
    const megatron::MlpBlock& block = registered_mlp_block(b.reg.config().mlp_kind);
    for (const megatron::ParamDecl& d : block.params(base_dims(b.reg.config(), b.reg.stage())))
      p.views.push_back(b.at(prefix + d.name));
    return p;
  }
  static Record carve_record(Arena& a, const GptShapes& sh, const LayerSpec&);
  static Workspace carve_workspace(Arena& a, const GptShapes& sh);
  static double record_bytes(const BlockSizes& z, const LayerSpec&);
  static double workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>&);
  static double flops(const ModelConfig& c, double tokens);
  // One GEMM-sized share of the block's FLOPs (its forward, TP-split).
  static void plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops);
  static double plan_exchange_elements(const ModelConfig&, const PlanDims&) { return 0; }
  static double plan_recompute(const ModelConfig&, const PlanDims&, const LayerSpec&,
                               std::vector<double>&) {
    return 0;  // no partial recompute (the whole slot: its recompute_module)
  }
  static void forward(float* out, Record& rec, const Params<ReadView>& w, Workspace& ws,
                      const BlockCall& call);
  static void backward(float* din, const Params<float*>& g, const float* dout, const Record& rec,
                       Workspace& ws, const Params<ReadView>& w, const BlockCall& call);
  static DecodeWorkspace carve_decode_workspace(Arena&, const GptShapes&, const DecodeDims&) {
    return {};
  }
  static double decode_workspace_floats(const ModelConfig&, int64_t, const DecodeDims&) {
    return 0;
  }
  // Refused: decoding does not take registered blocks yet.
  static void decode(float* out, DecodeWorkspace& ws, const float* in, const Params<ReadView>& w,
                     const GptShapes& sh, int64_t rows);
  // The sizes a block declares its parameters by (no token counts).
  static megatron::BlockDims base_dims(const ModelConfig& c, const StageLayout& st);
};

}  // namespace mt
