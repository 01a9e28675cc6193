// bf16 products as a register-blocked AVX512-BF16 (VDPBF16PS) kernel, for
// the linear layers of a bf16 run (matmul.cc sends them here).
//
// oneDNN 2.6's brgemm runs GPT-2 small's weight gradients (transposed A) at
// 480-600 GFLOP/s with 2 threads, its other linear products at 560-700. This
// kernel is 5-10% faster on the weight gradients and some forward shapes,
// a few percent slower on others (bench_matmul), and makes GPT-2 small's bf16
// training step ~5-7% faster overall (bench/README.md). Operands are
// read in VDPBF16PS's pair layout (two consecutive k values of one row or
// column in a 32-bit word): A stored (m, k) is already so and is read in
// place; A stored (k, m) and B either way are packed into it, blocked for
// the caches, and multiplied in 12 × 32 register tiles.
// Numerics as oneDNN's bf16 product: exact bf16 × bf16 products, fp32 sums
// (VDPBF16PS: round to nearest even, denormals flushed); only the order of
// the fp32 sums differs. The result does not depend on the thread count.
#pragma once
#include <cstdint>

namespace mt {

// C (m, n) [= or += when accumulate] A (m, k) · B (k, n) (+ bias (n), fp32),
// fp32 accumulation. A is stored (m, k) with row stride lda, or (k, m) when
// trans_a; B is stored (k, n) with row stride ldb, or (n, k) when trans_b.
// C is fp32 with row stride ldc, or bf16 when c_bf16 is given (then c is
// unused, no accumulation: the fp32 sum rounded once).
struct Bf16Gemm {
  int64_t m = 0, n = 0, k = 0;
  const uint16_t* a = nullptr;
  int64_t lda = 0;
  bool trans_a = false;
  const uint16_t* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  float* c = nullptr;
  uint16_t* c_bf16 = nullptr;
  int64_t ldc = 0;
  const float* bias = nullptr;
  bool accumulate = false;
};

// Whether this shape runs here: the CPU has AVX512-BF16 and the kernels'
// AVX-512 path is on (active_isa(); MT_ISA=avx2 sends bf16 products to
// oneDNN, as on a CPU without); an operand read with k contiguous (A not
// transposed, B transposed) needs an even k and row stride, 4-byte aligned.
bool gemm_bf16_supports(const Bf16Gemm& g);

// OpenMP over the current threads; the packing scratch is the kernel's own
// (grown to the largest product seen, then reused; calls are serialised).
void gemm_bf16(const Bf16Gemm& g);

// Bytes of packing scratch held (grows, never shrinks).
int64_t gemm_bf16_scratch_bytes();

}  // namespace mt
