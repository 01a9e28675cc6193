// cuBLASLt plans (descriptors, layouts, a heuristic-picked algorithm) cached
// per shape, one lazily created handle and a 32 MiB workspace, and the
// operand conversion kernels of the matmul twins. See matmul_util.h.
#include "kernels/cuda/matmul_util.h"

#include <cublasLt.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <compare>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/device.h"
#include "kernels/precision.h"

// MT_CUBLAS_CHECK(cublasLtMatmul(...)): an error names the call and cuBLAS's status.
#define MT_CUBLAS_CHECK(call)                                                              \
  do {                                                                                     \
    const cublasStatus_t mt_st_ = (call);                                                  \
    MT_CHECK(mt_st_ == CUBLAS_STATUS_SUCCESS, #call, " failed: ",                          \
             cublasLtGetStatusString(mt_st_), " (status ", int(mt_st_), ")");              \
  } while (0)

namespace mt::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // NVIDIA's advice for Hopper

// An LtProduct's shape with everything that selects descriptors or algorithm.
struct PlanKey {
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  LtType a_type, b_type, c_type;
  int64_t lda, ldb, ldc, bsa, bsb, bsc;
  bool has_bias, accumulate, tf32;
  uint32_t align_a, align_b, align_c, align_bias;  // bytes, powers of two <= 256
  auto operator<=>(const PlanKey&) const = default;
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  // cuBLAS's A is our B and its B our A (matmul_util.h); C doubles as D.
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// Handle, workspace and plans: one per process, created on first use and
// never destroyed (a handful of objects; freeing them at exit would race the
// CUDA runtime's own teardown and the allocation registry's destruction).
struct LtState {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<PlanKey, Plan> plans;
};
LtState& lt_state() {
  static LtState* s = new LtState;
  return *s;
}

cudaDataType_t data_type(LtType t) {
  return t == LtType::kF32 ? CUDA_R_32F : t == LtType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
}
size_t elem_bytes(LtType t) { return t == LtType::kF32 ? 4 : 2; }

// The largest power of two (<= 256) dividing the address of every matrix of
// the operand: its base, its rows (ld) and, batched, its batch stride.
uint32_t alignment(const void* p, int64_t ld, int64_t bs, int64_t batch, LtType t) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u;
  bits |= uint64_t(ld) * elem_bytes(t);
  if (batch > 1) bits |= uint64_t(bs) * elem_bytes(t);
  return uint32_t(bits & (~bits + 1));  // lowest set bit
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

// Column-major layout (rows, cols, ld) of `batch` matrices bs elements apart.
cublasLtMatrixLayout_t make_layout(LtType t, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t bs) {
  cublasLtMatrixLayout_t l = nullptr;
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, data_type(t), uint64_t(rows), uint64_t(cols), ld));
  if (batch > 1) {
    const int32_t count = int32_t(batch);
    MT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                     sizeof(count)));
    MT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &bs, sizeof(bs)));
  }
  return l;
}

Plan make_plan(const PlanKey& k, const LtProduct& p, cublasLtHandle_t handle) {
  Plan plan;
  const cublasComputeType_t compute = k.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F));
  // Cᵀ (n, m) = Bᵀ · Aᵀ column-major: cuBLAS A := our B, cuBLAS B := our A.
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
  if (k.has_bias) {
    // Bias (n) along the rows of column-major D (n, m): one value per our column.
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS));
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(data_type(k.c_type)));
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);  // for its alignment
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, int64_t(0));  // one bias for all
  }
  // Stored B is (k, n) row-major = column-major (n, k); (n, k) when trans_b = column-major (k, n).
  plan.lt_a = make_layout(k.b_type, k.trans_b ? k.k : k.n, k.trans_b ? k.n : k.k, k.ldb, k.batch,
                          k.bsb);
  // Stored A is (m, k) row-major = column-major (k, m); (k, m) when trans_a = column-major (m, k).
  plan.lt_b = make_layout(k.a_type, k.trans_a ? k.m : k.k, k.trans_a ? k.k : k.m, k.lda, k.batch,
                          k.bsa);
  plan.lt_c = make_layout(k.c_type, k.n, k.m, k.ldc, k.batch, k.bsc);

  cublasLtMatmulPreference_t pref = nullptr;
  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // A split-k reduction in C's type would round a bf16 C more than once:
  // only single-pass algorithms, or partial sums kept in fp32.
  const uint32_t schemes = k.c_type == LtType::kF32
                               ? uint32_t(CUBLASLT_REDUCTION_SCHEME_MASK)
                               : uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_b},  // cuBLAS A = our B
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_c}};
  for (const auto& [attr, v] : aligns)
    MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.lt_a, plan.lt_b, plan.lt_c,
                                     plan.lt_c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  MT_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
           "matmul (cuda): cuBLASLt has no algorithm for batch=", k.batch, " m=", k.m, " n=", k.n,
           " k=", k.k, " trans_a=", k.trans_a, " trans_b=", k.trans_b, " lda=", k.lda,
           " ldb=", k.ldb, " ldc=", k.ldc, " types a/b/c=", int(k.a_type), "/", int(k.b_type), "/",
           int(k.c_type), " bias=", k.has_bias, " alignments a/b/c=", k.align_a, "/", k.align_b,
           "/", k.align_c, " (", cublasLtGetStatusString(st),
           "); fix: use dense strides and 16-byte aligned buffers");
  plan.algo = result.algo;
  return plan;
}

}  // namespace

bool tf32_allowed() {
  static const bool on = [] {
    const char* v = std::getenv("MT_CUDA_ALLOW_TF32");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

void lt_matmul(const LtProduct& p) {
  PlanKey k{};
  k.batch = p.batch;
  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.trans_a = p.trans_a;
  k.trans_b = p.trans_b;
  k.a_type = p.a.type;
  k.b_type = p.b.type;
  k.c_type = p.c_type;
  k.lda = p.a.ld;
  k.ldb = p.b.ld;
  k.ldc = p.ldc;
  const bool one = p.batch == 1;  // batch strides play no part then: share the plan
  k.bsa = one ? 0 : p.a.bs;
  k.bsb = one ? 0 : p.b.bs;
  k.bsc = one ? 0 : p.bsc;
  k.has_bias = p.bias != nullptr;
  k.accumulate = p.accumulate;
  k.tf32 = p.tf32 && p.a.type == LtType::kF32 && p.b.type == LtType::kF32;
  k.align_a = alignment(p.a.data, p.a.ld, p.a.bs, p.batch, p.a.type);
  k.align_b = alignment(p.b.data, p.b.ld, p.b.bs, p.batch, p.b.type);
  k.align_c = alignment(p.c, p.ldc, p.bsc, p.batch, p.c_type);
  k.align_bias = p.bias ? alignment(p.bias, 0, 0, 1, p.c_type) : 0;

  LtState& s = lt_state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.handle == nullptr) {
    MT_CUBLAS_CHECK(cublasLtCreate(&s.handle));
    s.workspace = DeviceBuffer(Device::kCuda, kWorkspaceBytes);
  }
  auto it = s.plans.find(k);
  if (it == s.plans.end()) it = s.plans.emplace(k, make_plan(k, p, s.handle)).first;
  Plan& plan = it->second;
  if (p.bias) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  const float alpha = 1.f, beta = p.accumulate ? 1.f : 0.f;  // beta 0: C is not read
  MT_CUBLAS_CHECK(cublasLtMatmul(s.handle, plan.desc, &alpha, p.b.data, plan.lt_a, p.a.data,
                                 plan.lt_b, &beta, p.c, plan.lt_c, p.c, plan.lt_c, &plan.algo,
                                 s.workspace.data(), kWorkspaceBytes, stream()));
}

int64_t lt_plan_count() {
  LtState& s = lt_state();
  std::lock_guard<std::mutex> lock(s.mu);
  return int64_t(s.plans.size());
}

// ---- conversion kernels ----

namespace {

// bf16 bits of x as bf16_from_f32 (precision.h): nearest even, NaN kept quiet.
__device__ __forceinline__ uint16_t bf16_bits(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

// fp16 bits of x, nearest even (the value f16_round gives, precision.h).
__device__ __forceinline__ uint16_t f16_bits(float x) {
  return __half_as_ushort(__float2half_rn(x));
}

constexpr int kThreads = 256;

// One block row per matrix row (grid-stride in y), threads along the row.
template <bool kToBf16>
__global__ void pack_kernel(uint16_t* dst, const float* src, int64_t rows, int64_t cols,
                            int64_t ld, int64_t bs, int64_t total_rows) {
  for (int64_t r = blockIdx.y; r < total_rows; r += gridDim.y) {
    const int64_t b = r / rows, row = r - b * rows;
    const float* in = src + b * bs + row * ld;
    uint16_t* out = dst + r * cols;
    for (int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x; j < cols;
         j += int64_t(gridDim.x) * kThreads)
      out[j] = kToBf16 ? bf16_bits(in[j]) : f16_bits(in[j]);
  }
}

__global__ void widen_bf16_kernel(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads)
    out[i] = __uint_as_float(uint32_t(in[i]) << 16);
}

__global__ void round_bf16_kernel(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads)
    out[i] = bf16_bits(in[i]);
}

unsigned grid_1d(int64_t n) { return std::min(blocks_for(n, kThreads), 65535u); }

}  // namespace

void pack_low_precision(uint16_t* dst, bool to_bf16, const float* src, int64_t batch,
                        int64_t rows, int64_t cols, int64_t ld, int64_t bs) {
  const int64_t total_rows = batch * rows;
  const dim3 grid(std::min(blocks_for(cols, kThreads), 64u),
                  unsigned(std::min<int64_t>(total_rows, 65535)));
  if (to_bf16)
    pack_kernel<true><<<grid, kThreads, 0, stream()>>>(dst, src, rows, cols, ld, bs, total_rows);
  else
    pack_kernel<false><<<grid, kThreads, 0, stream()>>>(dst, src, rows, cols, ld, bs, total_rows);
  MT_CUDA_LAUNCH_CHECK();
}

void widen_bf16(float* out, const uint16_t* in, int64_t n) {
  if (n <= 0) return;
  widen_bf16_kernel<<<grid_1d(n), kThreads, 0, stream()>>>(out, in, n);
  MT_CUDA_LAUNCH_CHECK();
}

void round_bf16(uint16_t* out, const float* in, int64_t n) {
  if (n <= 0) return;
  round_bf16_kernel<<<grid_1d(n), kThreads, 0, stream()>>>(out, in, n);
  MT_CUDA_LAUNCH_CHECK();
}

}  // namespace mt::cuda
