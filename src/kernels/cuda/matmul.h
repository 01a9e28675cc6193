// CUDA twins of src/kernels/matmul.h on cuBLASLt: the same signatures and the
// same function, for operands and outputs in GPU memory. The entry points of
// matmul.cc dispatch here when their output lies on the GPU.
//
// Numerics (as the CPU's, to fp32 round-off; see matmul.h):
//  - kF32: fp32 operands, fp32 FMA accumulation (CUBLAS_COMPUTE_32F, no TF32).
//    MT_CUDA_ALLOW_TF32=1 in the environment (read once, off by default) lets
//    fp32 products run on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32):
//    faster, but operands keep only 10 mantissa bits, so results no longer
//    match the CPU to fp32 round-off.
//  - kBF16: operands rounded to bf16 (a given bf16 shadow is used as is; an
//    fp32 operand is converted into grow-only device scratch), fp32
//    accumulation, fp32 or bf16 C (rounded once, bias added before).
//  - kF16: operands rounded to fp16 (device scratch), fp32 accumulation, fp32
//    C: the CPU's emulation exactly, since an fp16 x fp16 product is exact in fp32.
// The bias rides cuBLASLt's bias epilogue: accumulate with bias is
// C += A·B + bias, as on the CPU. Asynchronous on mt::cuda::stream(), except
// measure_matmul_peak_flops, which waits for its timings.
#pragma once
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/precision.h"

namespace mt::cuda {

void matmul(WriteView c, const float* a, const float* b, ReadView bias, const MatmulShape& s,
            const uint16_t* b_bf16 = nullptr, const uint16_t* a_bf16 = nullptr);

void linear_forward(WriteView out, ReadView inp, ReadView weight, ReadView bias, int64_t n,
                    int64_t in, int64_t out_features, const Compute& cm = {});
void linear_backward(float* dinp, float* dweight, float* dbias, ReadView dout, ReadView inp,
                     ReadView weight, int64_t n, int64_t in, int64_t out_features,
                     bool accumulate_dinp = false, const Compute& cm = {});

// dbias (c) += column sums of dout (n, c): fp32, a fixed reduction tree
// (deterministic; differs from the CPU's row-order sum by fp32 round-off).
void bias_backward(float* dbias, const float* dout, int64_t n, int64_t c);
// x (n, c) += bias (c) on every row (fp32 or bf16 storage)
void bias_add(float* x, ReadView bias, int64_t n, int64_t c);

// The GPU's MFU denominator: the best FLOP/s of a size³ cuBLASLt product in
// `math` (bf16/fp16 operands already converted, fp32 C; kF32 honours
// MT_CUDA_ALLOW_TF32), over at least 5 timed runs and ~0.25 s, each run 10
// back-to-back products timed with CUDA events. Not dispatched from the CPU
// function (it has no pointer to look at): the trainer calls this one when it
// runs on the GPU (CPU-only builds define it as an error, matmul.cc). On an
// H100 SXM (CUDA 13): fp32 52 TFLOP/s at every size; bf16 654 / 825 / 842
// TFLOP/s at 2048 / 4096 / 8192 (fp16 about the same); TF32 421 at 4096.
// 2048 understates the GPU's rate: pass 4096 for the MFU denominator.
double measure_matmul_peak_flops(int64_t size = 2048, MathMode math = MathMode::kF32);

// cuBLASLt plans (descriptors + algorithm) built so far, one per distinct shape.
int64_t matmul_plan_count();

}  // namespace mt::cuda
