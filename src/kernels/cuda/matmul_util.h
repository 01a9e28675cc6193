// The cuBLASLt plumbing under the CUDA matmul twins (src/kernels/cuda/matmul.cu):
// one product description in our row-major terms, run through cached cuBLASLt
// plans, and the small conversion kernels the twins need. Plain C++ (no CUDA
// includes); used by the .cu files of src/kernels/cuda only.
//
// Row-major vs column-major: a row-major (r, c) matrix with row stride ld is
// the column-major (c, r) matrix with leading dimension ld, i.e. its
// transpose. So C (m, n) = A · B row-major is computed as the column-major
// product Cᵀ (n, m) = Bᵀ · Aᵀ: cuBLAS's "A" is our B and its "B" our A, each
// with the transpose flag it has here, and no data moves.
#pragma once
#include <cstdint>

namespace mt::cuda {

// Element type of an operand or output as cuBLASLt reads it.
enum class LtType : uint8_t { kF32, kBF16, kF16 };

// One operand: `batch` row-major matrices, row stride ld, batch stride bs
// (elements of `type`, all explicit).
struct LtOperand {
  const void* data = nullptr;
  LtType type = LtType::kF32;
  int64_t ld = 0, bs = 0;
};

// C[batch] (m, n) = A[batch] (m, k) · B[batch] (k, n) (+ bias (n)) (+ C when accumulate)
// A stored (m, k), or (k, m) when trans_a; B stored (k, n), or (n, k) when
// trans_b. fp32 accumulation (CUBLAS_COMPUTE_32F; _FAST_TF32 only when tf32).
// The bias is added in fp32 before C's single rounding; its type must be
// c_type (a cuBLASLt rule outside fp8), the caller converts otherwise.
struct LtProduct {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  LtOperand a, b;
  void* c = nullptr;
  LtType c_type = LtType::kF32;
  int64_t ldc = 0, bsc = 0;
  const void* bias = nullptr;  // (n) of c_type, or null
  bool accumulate = false;
  bool tf32 = false;  // fp32 operands through TF32 tensor cores (MT_CUDA_ALLOW_TF32=1)
};

// Enqueues p on mt::cuda::stream(). The first call for a shape (sizes,
// strides, types, flags and the pointers' alignments) builds its descriptors
// and asks cuBLASLt's heuristic for an algorithm; later calls reuse them.
void lt_matmul(const LtProduct& p);
// Distinct plans built so far (for tests of the cache).
int64_t lt_plan_count();

// Whether MT_CUDA_ALLOW_TF32=1 was set (read once, at the first call).
bool tf32_allowed();

// dst (batch·rows, cols) dense = src rounded to bf16 (to_bf16) or fp16 bits,
// src being `batch` row-major (rows, cols) matrices, row stride ld, batch stride bs.
void pack_low_precision(uint16_t* dst, bool to_bf16, const float* src, int64_t batch,
                        int64_t rows, int64_t cols, int64_t ld, int64_t bs);
// out[i] = fp32 of the bf16 in[i]; out[i] = bf16 of in[i] (n elements, dense).
void widen_bf16(float* out, const uint16_t* in, int64_t n);
void round_bf16(uint16_t* out, const float* in, int64_t n);

}  // namespace mt::cuda
