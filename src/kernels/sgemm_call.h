// One fp32 product on oneDNN's dnnl_sgemm ("gemm:jit", its packed GEMM):
// shared by matmul's sgemm route (kernels/matmul.cc) and the linear layers'
// gradients side by side (kernels/linear.cc). Internal to the kernels.
#pragma once
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>

#include "core/error.h"

namespace mt {

// Row-major: c (m, n) = op(a) · b, or += with accumulate; op(a) = a (m, k),
// or with trans_a a stored (k, m). Leading dimensions as stored.
struct SgemmCall {
  bool trans_a;
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  bool accumulate;
  float* c;
  int64_t ldc;
};

// Runs the product; the status, for check_sgemm (which may throw: not inside
// an OpenMP region).
inline dnnl_status_t run_sgemm(const SgemmCall& g) {
  return dnnl_sgemm(g.trans_a ? 'T' : 'N', 'N', g.m, g.n, g.k, 1.f, g.a, g.lda, g.b, g.ldb,
                    g.accumulate ? 1.f : 0.f, g.c, g.ldc);
}

inline void check_sgemm(const SgemmCall& g, dnnl_status_t st) {
  MT_CHECK(st == dnnl_success, "matmul: oneDNN sgemm failed with status ", int(st), " for m=", g.m,
           " n=", g.n, " k=", g.k, " lda=", g.lda, " ldb=", g.ldb, " ldc=", g.ldc,
           "; fix: check the buffers and strides");
}

// Bytes of the linear layers' own scratch (linear_backward's bf16 dout);
// matmul_scratch_bytes() counts it.
int64_t linear_scratch_bytes();

}  // namespace mt
