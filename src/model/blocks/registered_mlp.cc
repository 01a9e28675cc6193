#include "model/blocks/registered_mlp.h"

#include <map>
#include <mutex>

#include "backend/device.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "kernels/reduce.h"
#include "model/blocks/block_kinds.h"
#include "parallel/tensor_parallel_linear.h"

namespace megatron {
namespace detail {

// What a BlockPass reads: the layer's call, the block's views and memory.
struct PassState {
  const mt::BlockCall& call;
  BlockDims dims;
  const std::vector<ParamDecl>& decls;   // the block's params(), for the shapes
  const std::vector<mt::ReadView>& w;
  const std::vector<float*>* g = nullptr;  // backward only
  float* record = nullptr;
  float* workspace = nullptr;
  float* scratch = nullptr;  // (local_tokens, h)
};

}  // namespace detail

namespace {

// The process's registered blocks: written before any model is built, read after.
struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const MlpBlock>> blocks;
};
Registry& registry() {
  static Registry r;
  return r;
}

// A parameter's local shape on `tp_rank` of `tp_size`.
Weight local_weight(const detail::PassState& s, size_t i) {
  MT_CHECK(i < s.decls.size(), "a registered MLP block asked for parameter ", i, " of its ",
           s.decls.size(), "; fix: index params() in their order");
  const ParamDecl& d = s.decls[i];
  const mt::ReadView v = s.w[i];
  MT_CHECK(v.f32 != nullptr, "registered MLP blocks run in fp32, but the weights of this run are "
           "bf16; fix: leave out --bf16 / --fp16 with --mlp-kind");
  const int64_t tp = s.dims.tp_size;
  return Weight{v.f32, d.partition_dim == 0 ? d.rows / tp : d.rows,
                d.partition_dim == 1 ? d.cols / tp : d.cols};
}

// Refuses a parallel linear over a weight (or bias) split another way than it needs.
void check_split(const detail::PassState& s, size_t w, int b, int weight_dim, int bias_dim,
                 const char* linear) {
  MT_CHECK(w < s.decls.size() && s.decls[w].partition_dim == weight_dim &&
               (b < 0 || (size_t(b) < s.decls.size() && s.decls[size_t(b)].partition_dim == bias_dim)),
           "BlockPass::", linear, " takes a weight of partition_dim ", weight_dim,
           " and a bias of partition_dim ", bias_dim, ", but was given parameter ", w,
           b >= 0 ? " and bias " + std::to_string(b) : std::string(),
           "; fix: declare them so in params(), or index them in params()' order");
  if (weight_dim == 0)
    MT_CHECK(s.decls[w].cols == s.dims.hidden, "BlockPass::", linear, " reads the block's input "
             "(hidden ", s.dims.hidden, " columns), but ", s.decls[w].name, " has ",
             s.decls[w].cols, "; fix: a (features, hidden) weight");
}

mt::ReadView bias_view(const detail::PassState& s, int b) {
  return b < 0 ? mt::ReadView() : mt::ReadView(local_weight(s, size_t(b)).data);
}
float* bias_grad(const detail::PassState& s, int b) {
  return b < 0 ? nullptr : s.g->at(size_t(b));
}

}  // namespace

const BlockDims& BlockPass::dims() const { return s_->dims; }
int64_t BlockPass::layer() const { return s_->call.layer; }
Weight BlockPass::weight(size_t i) const { return local_weight(*s_, i); }
float* BlockPass::grad(size_t i) const {
  MT_CHECK(s_->g != nullptr, "BlockPass::grad called in forward; gradients exist in backward only");
  return s_->g->at(i);
}
float* BlockPass::record() const { return s_->record; }
float* BlockPass::workspace() const { return s_->workspace; }

void BlockPass::column_linear(float* y, const float* x, size_t w, int b) const {
  check_split(*s_, w, b, 0, 0, "column_linear");
  const mt::GptShapes& sh = s_->call.sh;
  const Weight wt = weight(w);
  mt::column_parallel_linear_forward(y, s_->call.full_a, x, wt.data, bias_view(*s_, b),
                                     sh.tokens(), wt.cols, wt.rows, sh.tp, sh.cm);
}

void BlockPass::column_linear_backward(float* dx, const float* dy, const float* x, size_t w,
                                       int b) const {
  check_split(*s_, w, b, 0, 0, "column_linear_backward");
  const mt::GptShapes& sh = s_->call.sh;
  const Weight wt = weight(w);
  MT_CHECK(s_->g != nullptr, "column_linear_backward called in forward");
  mt::column_parallel_linear_backward(s_->scratch, s_->g->at(w), bias_grad(*s_, b),
                                      s_->call.full_a, s_->call.full_b, dy, x, wt.data,
                                      sh.tokens(), wt.cols, wt.rows, sh.tp, sh.cm);
  mt::add_scaled_inplace(dx, s_->scratch, sh.local_tokens() * wt.cols, 1.f);  // dx +=
}

void BlockPass::row_linear(float* out, const float* x, size_t w, int b) const {
  check_split(*s_, w, b, 1, -1, "row_linear");
  const mt::GptShapes& sh = s_->call.sh;
  const Weight wt = weight(w);
  mt::row_parallel_linear_forward(out, s_->call.full_a, x, wt.data, bias_view(*s_, b),
                                  sh.tokens(), wt.cols, wt.rows, sh.tp, sh.cm);
}

void BlockPass::row_linear_backward(float* dx, const float* dout, const float* x, size_t w,
                                    int b) const {
  check_split(*s_, w, b, 1, -1, "row_linear_backward");
  const mt::GptShapes& sh = s_->call.sh;
  const Weight wt = weight(w);
  MT_CHECK(s_->g != nullptr, "row_linear_backward called in forward");
  mt::row_parallel_linear_backward(dx, s_->g->at(w), bias_grad(*s_, b), s_->call.full_b, dout, x,
                                   wt.data, sh.tokens(), wt.cols, wt.rows, sh.tp, sh.cm);
}

void register_mlp_block(const std::string& name, std::shared_ptr<const MlpBlock> block) {
  MT_CHECK(!name.empty() && name != "dense" && name != "moe",
           "register_mlp_block: '", name, "' cannot name a registered block (empty, or a kind "
           "the library has); fix: another name");
  MT_CHECK(block != nullptr, "register_mlp_block('", name, "'): the block is null");
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  MT_CHECK(r.blocks.count(name) == 0, "register_mlp_block: '", name,
           "' is registered already; fix: register each block once, under its own name");
  r.blocks[name] = std::move(block);
}

std::vector<std::string> registered_mlp_blocks() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, block] : r.blocks) names.push_back(name);
  return names;
}

}  // namespace megatron

namespace mt {

namespace {

megatron::BlockDims call_dims(const GptShapes& sh) {
  const RegisteredShapes& s = shapes_of<RegisteredMlp>(sh.kinds.get());
  MT_CHECK(s.block != nullptr, "a layer takes a registered MLP block, but the stage's shapes "
           "were made without it (shapes made by hand?)");
  megatron::BlockDims d = s.dims;
  d.tokens = sh.tokens();
  d.local_tokens = sh.local_tokens();
  return d;
}

}  // namespace

const megatron::MlpBlock& registered_mlp_block(const std::string& mlp_kind) {
  {
    auto& r = megatron::registry();
    const std::lock_guard<std::mutex> lock(r.mu);
    const auto it = r.blocks.find(mlp_kind);
    if (it != r.blocks.end()) return *it->second;
  }
  std::string list;
  for (const std::string& n : megatron::registered_mlp_blocks())
    list += (list.empty() ? "" : ", ") + n;
  MT_FAIL("--mlp-kind ", mlp_kind, " names no registered MLP block (registered: ",
          list.empty() ? std::string("none") : list, "); fix: a program built on the installed "
          "library registers it with megatron::register_mlp_block before the model is built "
          "(examples/custom_block), or leave out --mlp-kind");
}

int64_t registered_mlp_parameters(const ModelConfig& c, int64_t ffn) {
  megatron::BlockDims d = RegisteredMlp::base_dims(c, StageLayout{});
  d.ffn_hidden = ffn;
  int64_t count = 0;
  for (const megatron::ParamDecl& p : registered_mlp_block(c.mlp_kind).params(d))
    count = checked_add(count, checked_mul(p.rows, p.cols, "a registered block's parameters"),
                        "a registered block's parameters");
  return count;
}

megatron::BlockDims RegisteredMlp::base_dims(const ModelConfig& c, const StageLayout& st) {
  megatron::BlockDims d;
  d.hidden = c.hidden_size;
  d.ffn_hidden = c.ffn_hidden_size;
  d.tp_size = st.tp_size;
  d.tp_rank = st.tp_rank;
  return d;
}

RegisteredShapes RegisteredMlp::make_shapes(const ModelConfig& c, const StageLayout& st,
                                            const GptShapes&, const Communicator*) {
  const megatron::MlpBlock& block = registered_mlp_block(c.mlp_kind);
  const megatron::BlockDims d = base_dims(c, st);
  return RegisteredShapes{&block, d, block.params(d)};
}

void RegisteredMlp::param_specs(ParamRegistry& reg, const std::string& prefix) {
  const ModelConfig& c = reg.config();
  const megatron::MlpBlock& block = registered_mlp_block(c.mlp_kind);
  for (const megatron::ParamDecl& d : block.params(base_dims(c, reg.stage()))) {
    MT_CHECK(d.partition_dim >= -1 && d.partition_dim <= 1 && d.rows > 0 && d.cols > 0 &&
                 !(d.partition_dim == 1 && d.cols == 1),
             "registered MLP '", c.mlp_kind, "': parameter ", d.name, " (", d.rows, " x ",
             d.cols, ", partition_dim ", d.partition_dim, ") is no shape TP can split; fix: "
             "rows and cols > 0, partition_dim -1, 0 or (a matrix) 1");
    const bool matrix = d.cols > 1;
    const Init init = d.init == megatron::ParamDecl::Init::kNormal ? Init::kNormal
                      : d.init == megatron::ParamDecl::Init::kOnes ? Init::kOnes
                                                                   : Init::kZeros;
    const float std = d.init_std > 0 ? d.init_std
                      : d.output_layer ? output_init_std(c)
                                       : c.init_method_std;
    // Megatron's rule: weight decay on matrices, not on biases and other vectors.
    reg.add(prefix + d.name, d.rows, d.cols, matrix ? 2 : 1, d.partition_dim, init,
            init == Init::kNormal ? std : 0.f, matrix);
  }
}

RegisteredRecord RegisteredMlp::carve_record(Arena& a, const GptShapes& sh, const LayerSpec&) {
  const megatron::BlockDims d = call_dims(sh);
  RegisteredRecord r;
  r.data = a.alloc_f32(shapes_of<RegisteredMlp>(sh.kinds.get()).block->record_floats(d));
  return r;
}

RegisteredWorkspace RegisteredMlp::carve_workspace(Arena& a, const GptShapes& sh) {
  const megatron::BlockDims d = call_dims(sh);
  RegisteredWorkspace ws;
  ws.data = a.alloc_f32(shapes_of<RegisteredMlp>(sh.kinds.get()).block->workspace_floats(d));
  ws.scratch = a.alloc_f32(sh.local_tokens() * sh.h);
  return ws;
}

double RegisteredMlp::record_bytes(const BlockSizes& z, const LayerSpec&) {
  const RegisteredShapes& s = shapes_of<RegisteredMlp>(z.kinds);
  if (s.block == nullptr) return 0;
  megatron::BlockDims d = s.dims;
  d.tokens = int64_t(z.n);
  d.local_tokens = int64_t(z.nl);
  return 4.0 * double(s.block->record_floats(d));
}

double RegisteredMlp::workspace_bytes(const BlockSizes& z, const std::vector<LayerSpec>&) {
  const RegisteredShapes& s = shapes_of<RegisteredMlp>(z.kinds);
  if (s.block == nullptr) return 0;
  megatron::BlockDims d = s.dims;
  d.tokens = int64_t(z.n);
  d.local_tokens = int64_t(z.nl);
  return 4.0 * (double(s.block->workspace_floats(d)) + z.nl * z.h);
}

double RegisteredMlp::flops(const ModelConfig& c, double tokens) {
  return registered_mlp_block(c.mlp_kind).flops(base_dims(c, StageLayout{}), tokens);
}

void RegisteredMlp::plan_gemms(const ModelConfig& c, const PlanDims& d,
                               std::vector<double>& flops) {
  flops.push_back(RegisteredMlp::flops(c, d.n) / 3.0 / d.tp);
}

void RegisteredMlp::forward(float* out, Record& rec, const Params<ReadView>& w, Workspace& ws,
                            const BlockCall& call) {
  MT_CHECK(call.sh.cm.math == MathMode::kF32 && rec.in.f32 != nullptr,
           "registered MLP blocks run in fp32; fix: leave out --bf16 / --fp16 with --mlp-kind");
  const RegisteredShapes& s = shapes_of<RegisteredMlp>(call.sh.kinds.get());
  const megatron::detail::PassState st{call, call_dims(call.sh), s.decls,
                                       w.views, nullptr, rec.data, ws.data, ws.scratch};
  s.block->forward(out, rec.in.f32, megatron::BlockPass(&st));
}

void RegisteredMlp::backward(float* din, const Params<float*>& g, const float* dout,
                             const Record& rec, Workspace& ws, const Params<ReadView>& w,
                             const BlockCall& call) {
  const RegisteredShapes& s = shapes_of<RegisteredMlp>(call.sh.kinds.get());
  const megatron::detail::PassState st{call, call_dims(call.sh), s.decls,
                                       w.views, &g.views, rec.data, ws.data, ws.scratch};
  fill_zero(din, size_t(call.sh.local_tokens() * call.sh.h) * sizeof(float));
  s.block->backward(din, dout, rec.in.f32, megatron::BlockPass(&st));
}

void RegisteredMlp::decode(float*, DecodeWorkspace&, const float*, const Params<ReadView>&,
                           const GptShapes&, int64_t) {
  MT_FAIL("decoding does not take registered MLP blocks (--mlp-kind) yet; fix: generate or "
          "serve a model of the library's own blocks");
}

}  // namespace mt
