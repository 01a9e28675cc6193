// The norm block: LayerNorm, or RMSNorm (no mean, no bias), over rows of h.
// Megatron core's input_layernorm / pre_mlp_layernorm / final_layernorm.
#pragma once
#include <cstdint>
#include <string>

#include "model/blocks/block.h"

namespace mt {

template <class P>
struct NormParams {
  P w{};  // (h)
  P b{};  // (h)  LayerNorm only
};

// What backward needs: the output (the next block's input) and the statistics.
struct NormRecord {
  WriteView out;           // (s_local, b, h)
  float* mean = nullptr;   // (s_local, b)  LayerNorm only
  float* rstd = nullptr;   // (s_local, b)
};

// Adds `<prefix>.weight` (and `.bias` for LayerNorm) to the registry.
void norm_param_specs(ParamRegistry& reg, const std::string& prefix);

template <class P>
NormParams<P> bind_norm(const ParamBinder<P>& bind, const std::string& prefix) {
  return {bind.at(prefix + ".weight"), bind.maybe(prefix + ".bias")};
}

// keep_out false: the statistics only (the output is recomputed into a
// buffer the caller points `out` at).
NormRecord carve_norm_record(Arena& arena, const GptShapes& sh, bool keep_out = true);
// Bytes of one NormRecord: the output (saved values, with keep_out) and the
// fp32 statistics.
double norm_record_bytes(const BlockSizes& z, bool keep_out = true);

// out =, rstd (and mean) =; over `rows` rows of h.
void norm_forward(const GptShapes& sh, WriteView out, float* mean, float* rstd, ReadView in,
                  ReadView w, ReadView b, int64_t rows);
// din +=, dw (and db) +=.
void norm_backward(const GptShapes& sh, float* din, float* dw, float* db, const float* dout,
                   ReadView in, ReadView w, const float* mean, const float* rstd,
                   int64_t rows);

// The block over this rank's residual-stream slab (s_local, b, h).
void norm_block_forward(NormRecord& rec, ReadView in, const NormParams<ReadView>& w,
                        const GptShapes& sh);
void norm_block_backward(float* din, const NormParams<float*>& g, const float* dout,
                         const NormRecord& rec, ReadView in, const NormParams<ReadView>& w,
                         const GptShapes& sh);

}  // namespace mt
