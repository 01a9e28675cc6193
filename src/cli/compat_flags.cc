#include "cli/compat_flags.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

namespace {

// A flag as Megatron-LM's arguments.py declares it: a switch (no values) or
// one value from `choices` (empty: any value, checked by `check`).
struct InertFlag {
  const char* name;
  std::vector<std::string> choices;  // {}: a switch; {"*"}: any value
  const char* what;                  // what it selects in Megatron
};

const std::vector<InertFlag>& inert_flags() {
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
      // Memory and data-loader mechanics of PyTorch.
      {"--use-cpu-initialization", {}, "where PyTorch initializes (here always on the host)"},
      {"--manual-gc", {}, "Python's garbage collector"},
      {"--manual-gc-interval", {"*"}, "Python's garbage collector"},
      {"--empty-unused-memory-level", {"0", "1", "2"}, "PyTorch's CUDA cache"},
      {"--num-workers", {"*"}, "PyTorch data-loader processes"},
      {"--no-mmap-bin-files", {}, "how PyTorch reads .bin files (here always mapped)"},
      {"--no-create-attention-mask-in-dataloader", {}, "a causal mask tensor (never built here)"},
      {"--num-distributed-optimizer-instances", {"1"}, "copies of the distributed optimizer"},
  };
  return flags;
}

}  // namespace

std::function<std::vector<std::string>()> add_inert_megatron_flags(CLI::App& app) {
  CLI::Option_group* g = app.add_option_group(
      "accepted for Megatron-LM's scripts, without effect here (one start-up note lists them)");
  auto values = std::make_shared<std::vector<std::string>>(inert_flags().size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < inert_flags().size(); ++i) {
    const InertFlag& f = inert_flags()[i];
    std::string help = f.what;
    if (f.choices.size() > 1 || (f.choices.size() == 1 && f.choices[0] != "*")) {
      std::string list;
      for (const std::string& c : f.choices) list += (list.empty() ? "" : "|") + c;
      help += " (" + list + ")";
    }
    options.push_back(f.choices.empty() ? g->add_flag(f.name, help)
                                        : g->add_option(f.name, (*values)[i], help));
  }
  return [values, options]() {
    std::vector<std::string> given;
    for (size_t i = 0; i < options.size(); ++i) {
      if (options[i]->count() == 0) continue;
      const InertFlag& f = inert_flags()[i];
      const std::string& v = (*values)[i];
      if (f.choices.empty()) {
        given.push_back(f.name);
        continue;
      }
      if (f.choices[0] == "*") {
        const bool count = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        MT_CHECK(count, f.name, " ", v, " is not a whole number >= 0 (Megatron reads an int); fix: "
                 "e.g. ", f.name, " 2, or leave it out (it changes nothing here)");
      } else {
        std::string list;
        for (const std::string& c : f.choices) list += (list.empty() ? "" : ", ") + c;
        MT_CHECK(std::find(f.choices.begin(), f.choices.end(), v) != f.choices.end(), f.name, " ",
                 v, " is not one of Megatron-LM's choices (", list, ")",
                 std::string(f.name) == "--num-distributed-optimizer-instances"
                     ? " here: several optimizer instances across DP are not built"
                     : "",
                 "; fix: give one of them, or leave the flag out (it changes nothing here)");
      }
      given.push_back(std::string(f.name) + " " + v);
    }
    return given;
  };
}

}  // namespace mt
