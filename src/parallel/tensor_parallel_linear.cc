#include "parallel/tensor_parallel_linear.h"

#include "core/divide.h"
#include "kernels/matmul.h"
#include "parallel/mappings.h"

namespace mt {

namespace {
// input, or with SP its all-gather into `gathered` (n, in) workspace: fp32, or
// for a bf16 input its bf16 elements in the same bytes.
ReadView gather_input(float* gathered, ReadView input, int64_t n, int64_t in,
                      const TensorParallel& tp) {
  if (!(tp.sequence_parallel && tp.size() > 1)) return input;
  const int64_t slab_n = divide(n, tp.size(), "tokens by TP") * in;
  if (input.bf16) {
    auto* full = reinterpret_cast<uint16_t*>(gathered);
    gather_from_sp_region_forward(full, input.bf16, slab_n, *tp.tp);
    return full;
  }
  gather_from_sp_region_forward(gathered, input.f32, slab_n, *tp.tp);
  return gathered;
}
}  // namespace

void column_parallel_linear_forward(WriteView out, float* gathered, ReadView input,
                                    ReadView weight, ReadView bias, int64_t n, int64_t in,
                                    int64_t out_local, const TensorParallel& tp,
                                    const Compute& cm) {
  linear_forward(out, gather_input(gathered, input, n, in, tp), weight, bias, n, in, out_local, cm);
}

void column_parallel_linear_backward(float* dinput, float* dweight, float* dbias,
                                     float* gathered, float* dfull, ReadView dout,
                                     ReadView input, ReadView weight, int64_t n,
                                     int64_t in, int64_t out_local, const TensorParallel& tp,
                                     const Compute& cm) {
  const bool sp = tp.sequence_parallel && tp.size() > 1;
  // With SP, re-gather the input rather than keep the full copy from forward.
  const ReadView x = gather_input(gathered, input, n, in, tp);
  float* dx = sp ? dfull : dinput;
  linear_backward(dx, dweight, dbias, dout, x, weight, n, in, out_local, false, cm);
  if (tp.size() == 1) return;
  if (sp)
    gather_from_sp_region_backward(dinput, dfull, n / tp.size() * in, *tp.tp);
  else
    copy_to_tp_region_backward(dinput, n * in, *tp.tp);
}

void row_parallel_linear_forward(float* out, float* partial, ReadView input,
                                 ReadView weight, ReadView bias, int64_t n,
                                 int64_t in_local, int64_t out_features, const TensorParallel& tp,
                                 const Compute& cm) {
  const bool sp = tp.sequence_parallel && tp.size() > 1;
  float* y = sp ? partial : out;
  linear_forward(y, input, weight, nullptr, n, in_local, out_features, cm);
  int64_t rows = n;
  if (sp) {
    rows = divide(n, tp.size(), "tokens by TP");
    reduce_scatter_to_sp_region_forward(out, partial, rows * out_features, *tp.tp);
  } else if (tp.size() > 1) {
    reduce_from_tp_region_forward(out, n * out_features, *tp.tp);
  }
  if (bias) bias_add(out, bias, rows, out_features);
}

void row_parallel_linear_backward(float* dinput, float* dweight, float* dbias, float* dfull,
                                  const float* dout, ReadView input, ReadView weight,
                                  int64_t n, int64_t in_local, int64_t out_features,
                                  const TensorParallel& tp, const Compute& cm) {
  const bool sp = tp.sequence_parallel && tp.size() > 1;
  const int64_t rows = sp ? n / tp.size() : n;
  // The bias gradient sums this rank's rows of dout: with SP before the
  // gather, else inside linear_backward (with dout's bf16 rounding, one read).
  if (dbias && sp) bias_backward(dbias, dout, rows, out_features);
  const float* d = dout;
  if (sp) {
    reduce_scatter_to_sp_region_backward(dfull, dout, rows * out_features, *tp.tp);
    d = dfull;
  }
  linear_backward(dinput, dweight, sp ? nullptr : dbias, d, input, weight, n, in_local,
                  out_features, false, cm);
}

}  // namespace mt
