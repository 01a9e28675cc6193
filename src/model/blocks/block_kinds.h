// The registry of block kinds, one list per slot of a layer (Megatron core's
// ModuleSpec choices for self_attention and mlp). A kind is a struct of
// types and static functions, declared beside its block:
//
//   static constexpr const char* name;
//   template <class P> using Params;   // views of its parameters (ReadView / float*)
//   using Record, Workspace, DecodeWorkspace, Shapes;
//   static bool applies(const ModelConfig&, int64_t layer);   // not the default kind
//   static Shapes make_shapes(const ModelConfig&, const StageLayout&, const GptShapes&,
//                             const Communicator* ep);
//   static void param_specs(ParamRegistry&, const std::string& prefix);
//   template <class P> static Params<P> bind(const ParamBinder<P>&, const std::string& prefix);
//   static Record carve_record(Arena&, const GptShapes&, const LayerSpec&);  // Record::in set by the layer
//   static Workspace carve_workspace(Arena&, const GptShapes&);    // for the layers of sh.layer_specs
//   static double record_bytes(const BlockSizes&, const LayerSpec&);
//   static double workspace_bytes(const BlockSizes&, const std::vector<LayerSpec>&);
//   (the LayerSpec's partial recompute flags, recompute_act / _shared / _up_proj,
//   move a kind's recomputed outputs from its record to one workspace buffer)
//   static double flops(const ModelConfig&, double tokens);       // training FLOPs (MFU)
//   static void plan_gemms(const ModelConfig&, const PlanDims&, std::vector<double>& flops);
//   static double plan_exchange_elements(const ModelConfig&, const PlanDims&);
//   static double plan_recompute(const ModelConfig&, const PlanDims&, const LayerSpec&,
//                                std::vector<double>& flops);  // the GEMMs the spec's partial
//                                // recompute runs again; returns the values re-made element-wise
//   static void forward(float* out, Record&, const Params<ReadView>&, Workspace&, const BlockCall&);
//   static void backward(float* din, const Params<float*>& grads, const float* dout,
//                        const Record&, Workspace&, const Params<ReadView>&, const BlockCall&);
//   static DecodeWorkspace carve_decode_workspace(Arena&, const GptShapes&, const DecodeDims&);
//   static double decode_workspace_floats(const ModelConfig&, int64_t tp, const DecodeDims&);
//   MLP kinds:       static constexpr const char* recompute_module;  // its --recompute-modules name
//                    static void decode(float* out, DecodeWorkspace&, const float* in,
//                                       const Params<ReadView>&, const GptShapes&, int64_t rows);
//   attention kinds: static double plan_core_head_dim(const ModelConfig&);  // a head's core width
//                    using Cache;
//                    static Cache carve_cache(Arena&, const GptShapes&, const KvPoolDims&);
//                    static double cache_floats(const ModelConfig&, int64_t tp, double rows);
//                    static void decode(float* out, const Cache&, DecodeWorkspace&, const float* in,
//                                       const Params<ReadView>&, const GptShapes&,
//                                       std::span<const DecodeRow> rows);
//   (decode: a step's R rows, in and out (R, h); model/blocks/block.h's DecodeRow)
//
// A new kind is its own files plus one entry in its slot's list below; the
// layer, the stage, the decoder, --log-memory, plan and MFU reach it only
// through this interface. The first kind of a list is the default; a layer
// takes the first later kind whose applies() picks it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "model/blocks/attention_block.h"
#include "model/blocks/layer_spec.h"
#include "model/blocks/mla_block.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"
#include "model/blocks/registered_mlp.h"

namespace mt {

template <class... K>
struct KindList {
  static constexpr size_t size = sizeof...(K);
  template <size_t I>
  using At = std::tuple_element_t<I, std::tuple<K...>>;
  template <class P>
  using Params = std::variant<typename K::template Params<P>...>;
  using Record = std::variant<typename K::Record...>;
  using Records = std::tuple<typename K::Record...>;  // one of each kind
  using Workspaces = std::tuple<typename K::Workspace...>;
  using DecodeWorkspaces = std::tuple<typename K::DecodeWorkspace...>;
  using Shapes = std::tuple<typename K::Shapes...>;
  template <class Q>
  static constexpr bool has = (std::is_same_v<Q, K> || ...);
  template <class Q>
  static constexpr size_t index_of() {
    size_t i = 0, found = size;
    ((std::is_same_v<Q, K> ? (found = i, ++i) : ++i), ...);
    return found;
  }
};

// ---- The registry: one line per kind.
using AttentionKinds = KindList<SelfAttention, MultiLatentAttention>;
using MlpKinds = KindList<DenseMlp, MoeMlp, RegisteredMlp>;

// A kind of a list, with its index there (what with_kind passes).
template <size_t I, class K>
struct KindTag {
  static constexpr size_t index = I;
  using type = K;
};

namespace detail {
template <class Kinds, class F, size_t... I>
void with_kind(size_t index, F&& f, std::index_sequence<I...>) {
  ((index == I ? (f(KindTag<I, typename Kinds::template At<I>>{}), 0) : 0), ...);
}
}  // namespace detail

// Calls f(KindTag<index, kind>{}) for the kind at `index` of `Kinds`.
template <class Kinds, class F>
void with_kind(size_t index, F&& f) {
  detail::with_kind<Kinds>(index, std::forward<F>(f), std::make_index_sequence<Kinds::size>{});
}
// Calls f(KindTag<i, kind>{}) for every kind of `Kinds`.
template <class Kinds, class F>
void for_each_kind(F&& f) {
  for (size_t i = 0; i < Kinds::size; ++i) with_kind<Kinds>(i, f);
}

// One layer's decode cache, of its attention kind.
template <class Kinds>
struct CachesOf;
template <class... K>
struct CachesOf<KindList<K...>> {
  using type = std::variant<typename K::Cache...>;
};
using AttentionCache = CachesOf<AttentionKinds>::type;

// The spec of global layer `layer` of a model configured by `c`.
LayerSpec layer_spec(const ModelConfig& c, int64_t layer);
// Whether any layer of the model takes kind `index` of the slot.
bool model_uses_attention(const ModelConfig& c, size_t index);
bool model_uses_mlp(const ModelConfig& c, size_t index);
// Whether a layer of `specs` takes kind `index` of the slot `member` names
// (empty specs: shapes made by hand, the default kinds).
bool specs_take(const std::vector<LayerSpec>& specs, uint8_t LayerSpec::*member, size_t index);
// Whether a layer of `specs` takes MLP kind `index` and recomputes it (LayerSpec::recompute_mlp).
bool specs_recompute_mlp(const std::vector<LayerSpec>& specs, size_t index);
// Whether a layer of `specs` recomputes its norms' outputs (LayerSpec::recompute_norms).
bool specs_recompute_norms(const std::vector<LayerSpec>& specs);
// Whether a layer of `specs` takes kind `index` of the slot `member` names and
// sets the partial recompute `flag` (LayerSpec::recompute_act, ...).
bool specs_recompute(const std::vector<LayerSpec>& specs, uint8_t LayerSpec::*member,
                     size_t index, bool LayerSpec::*flag);
// Sets spec.recompute_mlp when `modules` (Megatron's --recompute-modules under
// selective granularity) names its MLP kind's recompute_module,
// spec.recompute_norms when they name "layernorm", recompute_up_proj for
// "mla_up_proj", and recompute_act / recompute_shared for "moe_act" /
// "shared_experts" unless the whole slot is recomputed (Megatron's "moe"
// checkpoint wraps them: nothing of the slot is kept anyway).
void mark_recomputed(LayerSpec& spec, const std::vector<std::string>& modules);

// Every kind's sizes on a rank (GptShapes::kinds, BlockSizes::kinds), made
// for the kinds the model uses (default-constructed for the others).
struct KindShapes {
  AttentionKinds::Shapes attention;
  MlpKinds::Shapes mlp;
};
std::shared_ptr<const KindShapes> make_kind_shapes(const ModelConfig& c, const StageLayout& st,
                                                   const GptShapes& sh, const Communicator* ep);

// Kind K's sizes (default ones when `s` is null: shapes made by hand in tests).
template <class K>
const typename K::Shapes& shapes_of(const KindShapes* s) {
  static const typename K::Shapes none{};
  if (s == nullptr) return none;
  if constexpr (AttentionKinds::has<K>)
    return std::get<AttentionKinds::index_of<K>()>(s->attention);
  else
    return std::get<MlpKinds::index_of<K>()>(s->mlp);
}

}  // namespace mt
