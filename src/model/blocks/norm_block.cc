#include "model/blocks/norm_block.h"

#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"

namespace mt {

void norm_param_specs(ParamRegistry& reg, const std::string& prefix) {
  const int64_t h = reg.config().hidden_size;
  const Init gamma = reg.config().apply_layernorm_1p ? Init::kZeros : Init::kOnes;  // 1 + 0
  reg.add(prefix + ".weight", h, 1, 1, -1, gamma, 0, false);
  if (!reg.config().rms_norm()) reg.add(prefix + ".bias", h, 1, 1, -1, Init::kZeros, 0, false);
}

NormRecord carve_norm_record(Arena& arena, const GptShapes& sh, bool keep_out) {
  const int64_t nl = sh.local_tokens();
  NormRecord r;
  if (keep_out) r.out = alloc_act(arena, sh, nl * sh.h);
  if (!sh.rms_norm) r.mean = arena.alloc_f32(nl);
  r.rstd = arena.alloc_f32(nl);
  return r;
}

double norm_record_bytes(const BlockSizes& z, bool keep_out) {
  return (keep_out ? z.e * z.nl * z.h : 0.0) + 4 * z.stats * z.nl;
}

void norm_forward(const GptShapes& sh, WriteView out, float* mean, float* rstd, ReadView in,
                  ReadView w, ReadView b, int64_t rows) {
  if (sh.rms_norm)
    rmsnorm_forward(out, rstd, in, w, rows, sh.h, sh.eps, sh.zero_centered_gamma);
  else
    layernorm_forward(out, mean, rstd, in, w, b, rows, sh.h, sh.eps, sh.zero_centered_gamma);
}

void norm_backward(const GptShapes& sh, float* din, float* dw, float* db, const float* dout,
                   ReadView in, ReadView w, const float* mean, const float* rstd,
                   int64_t rows) {
  if (sh.rms_norm)
    rmsnorm_backward(din, dw, dout, in, w, rstd, rows, sh.h, sh.zero_centered_gamma);
  else
    layernorm_backward(din, dw, db, dout, in, w, mean, rstd, rows, sh.h,
                       sh.zero_centered_gamma);
}

void norm_block_forward(NormRecord& rec, ReadView in, const NormParams<ReadView>& w,
                        const GptShapes& sh) {
  norm_forward(sh, rec.out, rec.mean, rec.rstd, in, w.w, w.b, sh.local_tokens());
}

void norm_block_backward(float* din, const NormParams<float*>& g, const float* dout,
                         const NormRecord& rec, ReadView in, const NormParams<ReadView>& w,
                         const GptShapes& sh) {
  norm_backward(sh, din, g.w, g.b, dout, in, w.w, rec.mean, rec.rstd, sh.local_tokens());
}

}  // namespace mt
