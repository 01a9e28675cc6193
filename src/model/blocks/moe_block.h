// The mixture-of-experts MLP block (Megatron core's MoELayer): a router
// (fp32 logits x·Wᵣᵀ, top-k, softmax, optional capacity), a token dispatcher
// that brings each routed (token, choice) pair to the rank holding its expert
// (moe_dispatch.h: all-to-all or all-gather over the expert-parallel group),
// the experts (moe_experts.h: each a GELU or SwiGLU MLP like the dense block,
// whole on its rank), and the combine: out(t) = Σ_j gate(t, j) · expert_j(x_t).
// Sibling of the dense MLP block; the layer picks it by LayerSpec (the MoeMlp kind, block_kinds.h).
//
// The block works on this rank's tokens of the residual stream (its SP slab
// under TP, its CP chunks): n = s_local · b rows, no TP collective. The
// router's load-balancing and z losses add their gradients to the logits in
// backward, scaled by PassContext::aux_loss_scale (Megatron's
// MoEAuxLossAutoScaler); their values go to PassContext::moe_stats.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/moe_router.h"
#include "model/blocks/block.h"
#include "model/blocks/mlp_block.h"

namespace mt {

// The mixture-of-experts layers' sizes on this rank (the MoeMlp kind's Shapes).
struct MoeShapes {
  int64_t experts = 0;      // E (0: no MoE layer)
  int64_t local = 0;        // experts held here: E / EP
  int64_t first = 0;        // global index of the first one
  int64_t topk = 0;
  int64_t f = 0, f_in = 0;  // an expert's ffn and fc1 rows (2f with SwiGLU)
  MoeRouting routing;        // score function, groups, scaling (the bias is a parameter)
  bool limited = false;      // groups or an expert bias: the aux losses count their own top-k
  bool router_fp32 = false;  // --moe-router-dtype fp32: logits and probs fp32 in any run
  int64_t aux_seqs = 0;     // 0: no load-balancing loss; 1: aux_loss; b: seq_aux_loss
  float aux_coeff = 0, z_coeff = 0;
  double capacity_factor = -1;  // < 0: dropless
  int64_t capacity = 0;     // each expert's pairs from one rank's n tokens (with a factor)
  bool drop_by_position = false, pad_to_capacity = false;
  bool alltoall = false;    // the dispatcher: all-to-all, else all-gather
  bool grouped = false;     // --moe-grouped-gemm: the local experts as one batched product
  // The expert-parallel group (null for shapes only planned: memory formulas).
  const Communicator* ep = nullptr;
  int64_t ranks = 1, rank = 0;  // EP size and this rank's index
  int64_t ep_size() const { return ranks; }
  int64_t ep_rank() const { return rank; }
  int64_t max_rows = 0;     // the experts' input rows on this rank, at most (padded)
  // The shared expert (a dense MLP every token visits, TP-split like the
  // dense one): its local ffn and fc1 rows (0: none).
  int64_t shared_f = 0, shared_f_in = 0;
};

// This rank's MoE sizes in `sh` (GptShapes::kinds).
const MoeShapes& moe_of(const GptShapes& sh);

template <class P>
struct ExpertParams {
  P fc1_w{};  // (f_in, h)  SwiGLU: [gate; up]
  P fc1_b{};  // (f_in)
  P fc2_w{};  // (h, f)
  P fc2_b{};  // (h)
};

template <class P>
struct MoeParams {
  P router_w{};                          // (E, h), replicated
  P expert_bias{};                       // (E) not trained (--moe-router-enable-expert-bias)
  std::vector<ExpertParams<P>> experts;  // this rank's, in global order
  MlpParams<P> shared;                   // the shared expert, if any
};

// Saved for backward. Token side: n rows, k choices; expert side: up to
// max_rows rows of this rank's experts, expert by expert, each expert's rows
// padded with zero rows (see moe_dispatch.h).
struct MoeRecord {
  ReadView in;                // (n, h) the norm's output (the layer sets it)
  float* logits = nullptr;    // (n, E) fp32
  float* scores = nullptr;    // (n, E) softmax over all experts
  int32_t* expert = nullptr;  // (n, k)
  float* prob = nullptr;      // (n, k) before capacity
  uint8_t* kept = nullptr;    // (n, k) 0 where the capacity dropped the choice
  float* gate = nullptr;      // (n, k) prob · kept
  double* counts = nullptr;   // (seqs, E) routed choices, summed over TP x CP (aux loss)
  // The dispatch (moe_dispatch.h).
  int64_t* perm = nullptr;      // (n·k) this rank's kept pairs t·k + j, by expert, token, choice
  int64_t* perm_tok = nullptr;  // (n·k) their tokens t
  int64_t* counts_all = nullptr;  // (EP, E) kept pairs of each EP rank for each expert
  int64_t* src = nullptr;         // (max_rows) expert row → exchange row (-1: padding)
  int64_t* inv = nullptr;         // (max_rows) all-to-all: received row → expert row
  int64_t* pair = nullptr;        // (max_rows) all-gather: expert row → (s·n + t)·k + j;
                                  // one EP rank: expert row → its token t (-1: padding)
  int64_t* meta = nullptr;        // [sent pairs, received rows, expert rows]
  WriteView xin;                  // (max_rows, h) the experts' inputs
  float* gate_rows = nullptr;     // (max_rows) their gates
  WriteView fc1;                  // (max_rows, f_in)
  WriteView act;                  // (max_rows, f)  (empty with recompute_act)
  WriteView y;                    // (max_rows, h) the experts' outputs (unweighted)
  MlpRecord shared;               // the shared expert's (its `in` is the block's;
                                  // empty with recompute_shared)
  // Megatron's "moe_act" (LayerSpec::recompute_act): act lives in
  // MoeWorkspace::act, redone from fc1 before the experts' backward;
  // "shared_experts" (recompute_shared): the shared expert's record is
  // MoeWorkspace::shared_rec, its forward redone before its backward.
  bool recompute_act = false;
  bool recompute_shared = false;
};

// The dispatch's bookkeeping on the host (sized once, at the carve: no
// allocation in the step).
struct MoeHostScratch {
  std::vector<int64_t> send_rows, recv_rows;  // (EP) rows to / from each EP rank
  ChunkSplit send_split, recv_split;          // (EP) their element chunks
  std::vector<int64_t> start;                 // max(EP·E, local + 1)
  std::vector<int64_t> next;                  // max(E, local)
  std::vector<int64_t> order;                 // (EP·n·k) all-gather: pairs by local expert
  std::vector<int64_t> capacity;              // moe_capacity_scratch(n, E, k)
};

// Scratch shared by every MoE layer and micro-batch.
struct MoeWorkspace {
  std::shared_ptr<MoeHostScratch> host;
  float* x32 = nullptr;      // (n, h) the router's fp32 input
  float* w32 = nullptr;      // (E, h) the router's fp32 weight (bf16 runs)
  float* dlogits = nullptr;  // (n, E)
  float* dprob = nullptr;    // (n, k)
  int32_t* aux_expert = nullptr;  // (n, k) the aux losses' plain top-k (MoeShapes::limited)
  double* load = nullptr;    // (E) the routed choices per expert (MoeShapes::limited)
  float* bias32 = nullptr;   // (E) the expert bias in fp32
  float* xa = nullptr;       // exchange buffers: max(n·k, max_rows, EP·n) rows of h
  float* xb = nullptr;
  float* va = nullptr;  // per-row values: max(n·k, max_rows)·EP
  float* vb = nullptr;
  float* rows_a = nullptr;      // (max_rows, h) expert-side gradients
  float* rows_b = nullptr;      // (max_rows, h)
  float* dgate_rows = nullptr;  // (max_rows) the expert rows' gate gradients
  float* dact = nullptr;        // (max_rows, f)
  float* dfc_in = nullptr;      // (max_rows, f_in) SwiGLU
  MlpWorkspace shared;          // the shared expert's
  float* shared_io = nullptr;   // (n, h) its output, then its input gradient
  // Shared by the layers that recompute them (sh.layer_specs): the experts'
  // activation output (max_rows, f) (moe_act), the shared expert's fc1 and
  // act (shared_experts).
  WriteView act;
  MlpRecord shared_rec;
};

// The sizes of the MoE layers of a stage (make_shapes).
MoeShapes moe_shapes(const ModelConfig& c, const StageLayout& st, const GptShapes& sh,
                     const Communicator* ep);

// Adds <prefix>router.weight (and <prefix>router.expert_bias, Megatron's
// buffer, with --moe-router-enable-expert-bias) and this rank's experts'
// <prefix>experts.local_experts.<global e>.linear_fc{1,2}.{weight,bias}.
void moe_param_specs(ParamRegistry& reg, const std::string& prefix);

template <class P>
MoeParams<P> bind_moe(const ParamBinder<P>& bind, const std::string& prefix) {
  const ModelConfig& c = bind.reg.config();
  const StageLayout& st = bind.reg.stage();
  MoeParams<P> m;
  m.router_w = bind.at(prefix + "router.weight");
  m.expert_bias = bind.maybe(prefix + "router.expert_bias");
  const int64_t local = c.num_experts / st.ep_size;
  for (int64_t e = st.ep_rank * local; e < (st.ep_rank + 1) * local; ++e) {
    const std::string p = prefix + "experts.local_experts." + std::to_string(e) + ".";
    m.experts.push_back({bind.at(p + "linear_fc1.weight"), bind.maybe(p + "linear_fc1.bias"),
                         bind.at(p + "linear_fc2.weight"), bind.maybe(p + "linear_fc2.bias")});
  }
  if (c.moe_shared_expert_intermediate_size > 0)
    m.shared = bind_mlp(bind, prefix + "shared_experts.");
  return m;
}

// Without the parts `spec` recomputes (LayerSpec::recompute_act / _shared);
// the workspace with their buffers when a layer of sh.layer_specs does.
MoeRecord carve_moe_record(Arena& arena, const GptShapes& sh, const LayerSpec& spec);
MoeWorkspace carve_moe_workspace(Arena& arena, const GptShapes& sh);
// The expert rows one rank plans for n tokens (the worst case of the routing).
int64_t moe_max_rows(const MoeShapes& m, int64_t n);
// Bytes of one MoeRecord and of the MoeWorkspace for n tokens of h (their
// carves, planned): the worst-case expert rows; n_full: the micro-batch's
// rows before the SP split (the shared expert's fc1 and act); act, shared:
// the record keeps them, or the workspace holds them for the layers that
// recompute them.
struct MoeKeeps {
  bool act = true, shared = true;
};
double moe_record_bytes(const MoeShapes& m, int64_t n, int64_t n_full, int64_t h, bool bf16,
                        bool swiglu, MoeKeeps keep = {});
double moe_workspace_bytes(const MoeShapes& m, int64_t n, int64_t n_full, int64_t h, bool bf16,
                           bool swiglu, MoeKeeps recompute = {false, false});
// Training FLOPs over `tokens` tokens: router and the k experts each token
// visits (Megatron's count: an MoE layer's MLP is topk expert MLPs).
double moe_flops(const ModelConfig& c, double tokens);

// out (n, h) =: the combined experts' outputs for this rank's tokens.
void moe_block_forward(float* out, MoeRecord& rec, const MoeParams<ReadView>& w, MoeWorkspace& ws,
                       const BlockCall& call);
// din (n, h) =; weight gradients +=. dout (n, h): gradient of out.
void moe_block_backward(float* din, const MoeParams<float*>& g, const float* dout,
                        const MoeRecord& rec, MoeWorkspace& ws, const MoeParams<ReadView>& w,
                        const BlockCall& call);

// --- Decoding (model/batched_decoder.h): the block over a step's R rows;
// with EP > 1 every rank of the EP group holds the same rows and its own
// experts. Each local expert runs once over the rows routed to it.
struct MoeDecodeWorkspace {
  float* logits = nullptr;      // (R, E)
  float* bias32 = nullptr;      // (E) the expert bias in fp32
  float* scores = nullptr;      // (R, E)
  float* prob = nullptr;        // (R, k)
  int32_t* expert = nullptr;    // (R, k)
  int64_t* rows = nullptr;      // (R) an expert's rows
  float* gate = nullptr;        // (R) and their weights
  float* x = nullptr;           // (R, h) an expert's inputs
  float* fc = nullptr;          // (R, f_in)
  float* act = nullptr;         // (R, f)
  float* y = nullptr;           // (R, h)
  MlpDecodeWorkspace shared;    // the shared expert's
  float* shared_out = nullptr;  // (R, h)
};
MoeDecodeWorkspace carve_moe_decode_workspace(Arena& arena, const GptShapes& sh, int64_t rows);
double moe_decode_workspace_floats(const ModelConfig& c, int64_t tp, int64_t rows);
// out (R, h) = Σ_j prob_j · expert_j(in) over each row's top-k experts (those
// on this rank, summed over the EP group), in the order of the experts.
void moe_block_decode(float* out, MoeDecodeWorkspace& ws, const float* in,
                      const MoeParams<ReadView>& w, const GptShapes& sh, int64_t rows);

// The MoE MLP as a kind of the MLP slot (model/blocks/block_kinds.h): the
// layers --num-experts and --moe-layer-freq make MoE layers.
struct MoeMlp {
  static constexpr const char* name = "moe";
  static constexpr const char* recompute_module = "moe";  // Megatron's: the whole MoE layer
  template <class P>
  using Params = MoeParams<P>;
  using Record = MoeRecord;
  using Workspace = MoeWorkspace;
  using DecodeWorkspace = MoeDecodeWorkspace;
  using Shapes = MoeShapes;
  static bool applies(const ModelConfig& c, int64_t layer) { return c.is_moe_layer(layer); }
  static Shapes make_shapes(const ModelConfig& c, const StageLayout& st, const GptShapes& sh,
                            const Communicator* ep) {
    return moe_shapes(c, st, sh, ep);
  }
  static void param_specs(ParamRegistry& reg, const std::string& prefix) {
    moe_param_specs(reg, prefix);
  }
  template <class P>
  static Params<P> bind(const ParamBinder<P>& b, const std::string& prefix) {
    return bind_moe(b, prefix);
  }
  static Record carve_record(Arena& a, const GptShapes& sh, const LayerSpec& spec) {
    return carve_moe_record(a, sh, spec);
  }
  static Workspace carve_workspace(Arena& a, const GptShapes& sh) {
    return carve_moe_workspace(a, sh);
  }
  // The carves above, planned for the worst-case routing (moe_max_rows).
  static double record_bytes(const BlockSizes& z, const LayerSpec& spec);
  static double workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>& specs);
  static double flops(const ModelConfig& c, double tokens) { return moe_flops(c, tokens); }
  // The router, each local expert's share of the n·k routed rows (balanced),
  // the shared expert TP-split like the dense MLP; the dispatch's rows.
  static void plan_gemms(const ModelConfig& c, const PlanDims& d, std::vector<double>& flops);
  static double plan_exchange_elements(const ModelConfig& c, const PlanDims& d);
  // moe_act: the activation over the n·k routed rows again; shared_experts:
  // the shared expert's two GEMMs.
  static double plan_recompute(const ModelConfig& c, const PlanDims& d, const LayerSpec& spec,
                               std::vector<double>& flops);
  static void forward(float* out, Record& rec, const Params<ReadView>& w, Workspace& ws,
                      const BlockCall& call) {
    moe_block_forward(out, rec, w, ws, call);
  }
  static void backward(float* din, const Params<float*>& g, const float* dout, const Record& rec,
                       Workspace& ws, const Params<ReadView>& w, const BlockCall& call) {
    moe_block_backward(din, g, dout, rec, ws, w, call);
  }
  static DecodeWorkspace carve_decode_workspace(Arena& a, const GptShapes& sh,
                                                const DecodeDims& dims) {
    return carve_moe_decode_workspace(a, sh, dims.rows);
  }
  static double decode_workspace_floats(const ModelConfig& c, int64_t tp, const DecodeDims& dims) {
    return moe_decode_workspace_floats(c, tp, dims.rows);
  }
  static void decode(float* out, DecodeWorkspace& ws, const float* in, const Params<ReadView>& w,
                     const GptShapes& sh, int64_t rows) {
    moe_block_decode(out, ws, in, w, sh, rows);
  }
};

}  // namespace mt
