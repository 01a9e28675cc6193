// Matrix multiply through oneDNN `matmul` primitives (fp32 now, bf16 later).
// A primitive is created once per distinct shape/stride/flags and cached for
// the life of the process; every call after the first only wraps pointers.
#pragma once
#include <cstdint>

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
};

void matmul(float* c, const float* a, const float* b, const float* bias, const MatmulShape& s);

// Linear layer with PyTorch/Megatron weight layout W (out, in):
// out (n, out) = inp (n, in) · Wᵀ + bias        [out: =]
void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int64_t n, int64_t in, int64_t out_features);
// dinp (n, in) = dout · W   [= , or += when accumulate_dinp; skipped if dinp null]
// dweight (out, in) += doutᵀ · inp ; dbias (out) += column sums of dout (if non-null)
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t n, int64_t in,
                     int64_t out_features, bool accumulate_dinp = false);

// dbias (c) += column sums of dout (n, c)
void bias_backward(float* dbias, const float* dout, int64_t n, int64_t c);
// x (n, c) += bias (c) on every row
void bias_add(float* x, const float* bias, int64_t n, int64_t c);

// Achieved fp32 FLOP/s of a size³ oneDNN matmul on the current thread count
// (the MFU denominator). Runs ~0.3 s.
double measure_matmul_peak_flops(int64_t size = 2048);

// Number of distinct primitives created so far (for tests of the cache).
int64_t matmul_primitive_count();

}  // namespace mt
