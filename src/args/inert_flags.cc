#include "args/inert_flags.h"

namespace mt {

const std::vector<InertFlag>& inert_megatron_flags() {
  static const std::vector<InertFlag> flags = {
      // Model implementation and fused GPU kernels.
      {"--use-mcore-models", {}, "deprecated in Megatron: megatron core models are the default"},
      {"--attention-backend", {"flash", "fused", "unfused", "local", "auto"}, "GPU attention kernel"},
      {"--use-flash-attn", {}, "FlashAttention on the GPU"},
      {"--transformer-impl", {"local", "transformer_engine", "inference_optimized"},
       "Transformer Engine or local GPU modules"},
      {"--no-masked-softmax-fusion", {}, "a fused GPU kernel"},
      {"--no-bias-gelu-fusion", {}, "a fused GPU kernel"},
      {"--no-bias-swiglu-fusion", {}, "a fused GPU kernel"},
      {"--no-bias-dropout-fusion", {}, "a fused GPU kernel"},
      {"--no-rope-fusion", {}, "a fused GPU kernel"},
      {"--cross-entropy-loss-fusion", {}, "a fused GPU kernel"},
      {"--cross-entropy-fusion-impl", {"native", "te"}, "a fused GPU kernel"},
      {"--no-gradient-accumulation-fusion", {}, "a fused GPU kernel"},
      {"--no-persist-layer-norm", {}, "a fused GPU kernel"},
      {"--tp-comm-overlap", {}, "Transformer Engine's TP communication overlap"},
      {"--overlap-p2p-communication", {}, "NCCL send/recv overlap"},
      {"--defer-embedding-wgrad-compute", {}, "a GPU scheduling choice"},
      {"--moe-shared-expert-overlap", {}, "overlapping the shared expert with the token "
       "dispatcher's communication on the GPU (the numbers are the same)"},
      {"--mla-down-proj-fusion", {}, "a fused GPU kernel (MLA's q/kv down-projections)"},
      {"--cache-mla-latents", {}, "FlashMLA decoding (the decoder here always caches MLA's "
       "latents)"},
      // Checkpoint back-ends: this build writes its own re-shardable format.
      {"--ckpt-format", {"torch", "torch_dist", "zarr", "fsdp_dtensor", "torch_dcp"},
       "PyTorch checkpoint back-end"},
      {"--use-dist-ckpt", {}, "PyTorch distributed checkpoint"},
      {"--ckpt-fully-parallel-save", {}, "PyTorch distributed checkpoint"},
      {"--ckpt-fully-parallel-load", {}, "PyTorch distributed checkpoint"},
      {"--ckpt-assume-constant-structure", {}, "PyTorch distributed checkpoint"},
      {"--dist-ckpt-strictness",
       {"assume_ok_unexpected", "log_unexpected", "log_all", "raise_unexpected", "raise_all",
        "return_unexpected", "return_all", "ignore_all"},
       "PyTorch distributed checkpoint"},
      {"--no-load-rng", {}, "PyTorch RNG state (this build's random numbers are counter-based)"},
      {"--no-save-rng", {}, "PyTorch RNG state (this build's random numbers are counter-based)"},
      {"--distribute-saved-activations", {}, "where recomputed layers' inputs are kept "
       "(split over TP on the GPU; the numbers are the same)"},
      // Memory and data-loader mechanics of PyTorch.
      {"--use-cpu-initialization", {}, "where PyTorch initializes (here always on the host)"},
      {"--manual-gc", {}, "Python's garbage collector"},
      {"--manual-gc-interval", {"*"}, "Python's garbage collector"},
      {"--empty-unused-memory-level", {"0", "1", "2"}, "PyTorch's CUDA cache"},
      {"--num-workers", {"*"}, "PyTorch data-loader processes"},
      {"--no-mmap-bin-files", {}, "how PyTorch reads .bin files (here always mapped)"},
      {"--no-create-attention-mask-in-dataloader", {}, "a causal mask tensor (never built here)"},
      {"--num-distributed-optimizer-instances", {"1"}, "copies of the distributed optimizer"},
      // Tokenizer options of other models.
      {"--tiktoken-pattern", {"v1", "v2"}, "TikTokenizer's split pattern (other tokenizers "
       "ignore it, as in Megatron-LM)"},
      {"--vocab-extra-ids", {"*"}, "T5's span-masking tokens (Megatron-LM's GPT tokenizers add "
       "none)"},
  };
  return flags;
}

}  // namespace mt
