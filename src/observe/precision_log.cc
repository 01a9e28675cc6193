#include "observe/precision_log.h"

#include "core/log.h"
#include "kernels/matmul.h"

namespace mt {

// What the GEMMs of --bf16 / --fp16 run on this CPU.
void log_precision(const TrainArgs& args, bool rank0, Device device) {
  if (device == Device::kCuda) {
    if (args.bf16 || args.fp16)
      log_line(rank0, "%s: cuBLASLt GEMMs on %s operands with fp32 accumulation (GPU)\n",
               args.bf16 ? "bf16" : "fp16", args.bf16 ? "bf16" : "fp16");
    else
      log_line(rank0,
               "fp32: cuBLASLt GEMMs in fp32 without TF32 (GPU; MT_CUDA_ALLOW_TF32=1 "
               "allows it)\n");
    return;
  }
  if (args.bf16)
    log_line(rank0, "%s\n",
             matmul_bf16_native()
                 ? "bf16: GEMMs on bf16 operands with fp32 accumulation (CPU has native bf16 "
                   "instructions)"
                 : "bf16: no native bf16 matmul here (no bf16 instructions in this CPU, or oneDNN "
                   "capped below them); the bf16-stored GEMM operands are multiplied in fp32 (the "
                   "same products, fp32 speed; bf16 memory savings kept)");
  if (args.fp16)
    log_line(rank0,
             "fp16: GEMM operands rounded to fp16 and multiplied in fp32 (no fast fp16 "
             "matmul on this CPU), %s loss scaling\n",
             args.loss_scale > 0 ? "static" : "dynamic");
}

}  // namespace mt
