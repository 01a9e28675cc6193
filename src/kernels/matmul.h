// Matrix multiply through oneDNN `matmul` primitives, fp32 or mixed precision.
// A primitive is created once per distinct shape/stride/flags/math mode and
// cached for the life of the process; every call after the first only wraps
// pointers (and, in bf16/fp16, converts operands into reused scratch).
// Unbatched bf16 products (the linear layers) run on the VDPBF16PS kernel of
// gemm_bf16.h instead where the build and shape allow (same numerics class:
// bf16 operands, fp32 sums).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/device.h"
#include "kernels/precision.h"

namespace mt {

// C[batch] (m, n) = A[batch] (m, k) · B[batch] (k, n) (+ bias (n)) (+ C if accumulate)
// A is stored (m, k) row-major, or (k, m) when trans_a; B is stored (k, n),
// or (n, k) when trans_b. Leading dims are the row strides of the *stored*
// matrices (0 = dense); batch strides likewise (0 = dense).
struct MatmulShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0;
  bool accumulate = false;  // C += A·B (oneDNN sum post-op)
  // kF32: fp32 throughout. kBF16: A and B rounded to bf16 (nearest even), fp32
  // accumulation, fp32 bias and C. kF16: A and B rounded to fp16 values, then
  // the fp32 primitive (oneDNN 2.6 creates no fp16 matmul on CPUs without
  // AVX512_FP16): the numerics of fp16 operands with fp32 accumulation, at fp32 speed.
  MathMode math = MathMode::kF32;
};

// C [= or += when accumulate]. In kBF16, b_bf16 (if given) is B already in
// bf16 with B's layout and strides (a weight shadow): it is used as is and b
// may then be null; a_bf16 likewise for A. Both are ignored in the other
// modes. Other low-precision operands are converted into dense scratch owned by
// the kernel, grown to the largest size seen and then reused.
// The bias may be stored in bf16 (a bf16 model's); it is widened per call.
// C may be stored in bf16 (bf16 math, dense, no accumulation): the fp32
// accumulation rounded once.
void matmul(WriteView c, const float* a, const float* b, ReadView bias, const MatmulShape& s,
            const uint16_t* b_bf16 = nullptr, const uint16_t* a_bf16 = nullptr);

// Linear layer with PyTorch/Megatron weight layout W (out, in):
// out (n, out) = inp (n, in) · Wᵀ + bias        [out: =]
// Both GEMMs run in cm.math. Weights and bias are fp32 or (bf16 math only)
// bf16 storage; an fp32 weight in bf16 math is converted on every call.
// inp and out may be bf16 storage in bf16 math (a bf16 run's activations).
void linear_forward(WriteView out, ReadView inp, ReadView weight, ReadView bias,
                    int64_t n, int64_t in, int64_t out_features, const Compute& cm = {});
// dinp (n, in) = dout · W   [= , or += when accumulate_dinp; skipped if dinp null]
// dweight (out, in) += doutᵀ · inp ; dbias (out) += column sums of dout (if non-null)
// dinp and dweight products in cm.math (dweight accumulates in fp32); dbias in fp32.
// dout may be bf16 storage in bf16 math (used as is) when dbias is null.
void linear_backward(float* dinp, float* dweight, float* dbias, ReadView dout,
                     ReadView inp, ReadView weight, int64_t n, int64_t in,
                     int64_t out_features, bool accumulate_dinp = false, const Compute& cm = {});

// Grouped linear layers (an MoE rank's experts as one product): `groups`
// linears of the same shape, group g's rows [g·rows, (g+1)·rows) of inp and
// out, its weight at weight + g·weight_stride elements (fp32, or bf16 in bf16
// math); no bias. One batched product per call.
// out (groups·rows, out) = inp (groups·rows, in) · W_gᵀ                 [=]
void grouped_linear_forward(WriteView out, ReadView inp, ReadView weight, int64_t weight_stride,
                            int64_t groups, int64_t rows, int64_t in, int64_t out_features,
                            const Compute& cm = {});
// dinp = dout · W_g [=, skipped if null];
// dweight_g (at dweight + g·grad_stride) += doutᵀ · inp.
void grouped_linear_backward(float* dinp, float* dweight, int64_t grad_stride, const float* dout,
                             ReadView inp, ReadView weight, int64_t weight_stride, int64_t groups,
                             int64_t rows, int64_t in, int64_t out_features,
                             const Compute& cm = {});

// dbias (c) += column sums of dout (n, c)
void bias_backward(float* dbias, const float* dout, int64_t n, int64_t c);
// x (n, c) += bias (c) on every row (fp32 or bf16 storage)
void bias_add(float* x, ReadView bias, int64_t n, int64_t c);

// One product of the CPU's peak measurement: C (m, n) = A (m, k) · B (k, n).
struct PeakShape {
  int64_t m = 0, n = 0, k = 0;
};

// The CPU's matmul peak (the MFU denominator): each shape's best rate and the
// best of all.
struct PeakMeasurement {
  double flops = 0;                 // the highest of shape_flops
  std::vector<PeakShape> shapes;
  std::vector<double> shape_flops;  // each shape's best FLOP/s (in bf16 over both kernels)
  int rounds = 0;                   // runs of every shape (and kernel)
  // The median run of the best shape over its best run (<= 1): how far the
  // peak product itself falls short of its own best when run again and
  // again (on a shared machine, the neighbours' load; the first round, which
  // creates the primitives, left out).
  double median_ratio = 1;
  double seconds = 0;               // the measurement's wall time
  // "2048x2048x2048 171.2, 4096x2048x1024 180.3 GFLOP/s, best of 3 rounds in 1.02 s"
  std::string describe() const;
};

// The shapes of a peak of `size`: size³; a wide, shallower product of the
// same FLOPs, (2·size) x size x (size/2) (4096x2048x1024 for 2048); and
// `model_linear` when given (m > 0: the run's own typical linear layer, its
// rows cut, to a multiple of 64, so that its FLOPs stay within size³'s).
std::vector<PeakShape> matmul_peak_shapes(int64_t size, PeakShape model_linear = {});

// Best FLOP/s of each shape in `math` on the current thread count (in bf16
// both operands stored in bf16, so no conversion is counted, and the higher
// of oneDNN's and the VDPBF16PS kernel's where the CPU has it). Round robin
// over the shapes, so that a burst of other load on a shared machine hits
// each alike: at least 2 rounds, then more while one more fits in
// `budget_seconds` (at most 100). ~1 s on 2 cores for the 2048 shapes.
PeakMeasurement measure_matmul_peak(const std::vector<PeakShape>& shapes, MathMode math,
                                    double budget_seconds = 1.0);
// measure_matmul_peak(matmul_peak_shapes(size), math).flops
double measure_matmul_peak_flops(int64_t size = 2048, MathMode math = MathMode::kF32);
// The MFU denominator of a run on `device`: the CPU's measure_matmul_peak_flops(2048)
// above, or the GPU's best cuBLASLt rate of an 8192^3 product.
double measure_matmul_peak_flops_on(Device device, MathMode math);

// Number of distinct primitives created so far (for tests of the cache).
int64_t matmul_primitive_count();

// Whether bf16 matmuls run on bf16 operands here: the CPU has bf16 dot-product
// instructions (AVX512_BF16 / AMX) and oneDNN creates bf16 matmuls. Without,
// MathMode::kBF16 rounds the operands to bf16 and multiplies them with the
// fp32 primitive (a bf16 x bf16 product is exact in fp32): the same results
// at fp32 speed, where oneDNN's emulation of bf16 would be ~3x slower.
bool matmul_bf16_native();
// Bytes of operand scratch the bf16/fp16 paths hold (grows, never shrinks).
int64_t matmul_scratch_bytes();

}  // namespace mt
