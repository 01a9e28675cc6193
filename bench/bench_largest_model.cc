// The largest GPT of a family that fits a memory budget per rank, by the
// closed-form prediction `megatron train` uses (memory/memory_report.h) — the
// number of layers is raised until the most loaded rank's predicted bytes
// exceed the budget. The family: hidden H (default 2048, GPT-3 XL's), H/128
// heads, ffn 4H, seq S (default 2048), vocabulary 50257 padded to 50304,
// micro-batch 1, DP = 2 with the distributed optimizer, bf16 and full
// recompute (uniform, 1 layer). One JSON line for this build's bf16 with
// ZeRO-1 (the distributed optimizer), one with Megatron-FSDP's
// optim_grads_params (ZeRO-3: weights, gradients and optimizer state sharded,
// plus the staging pools of the embeddings, the loss head and one layer (two
// for the weights: the next layer's gather runs beside this one's)), and
// one for the bf16 before megatron.cpp matched Megatron-LM's bytes (10 + 8/d
// bytes per parameter: fp32 weights, their bf16 copy, fp32 grads, Adam m and
// v sharded; fp32 activations), reconstructed from the same formula.
// Usage: bench_largest_model [budget_gb=20] [hidden=2048] [seq=2048] [dp=2]
#include <cstdio>
#include <cstdlib>

#include "bench_cli.h"
#include "memory/memory_report.h"
#include "model/params.h"
#include "optim/staged_grads.h"
#include "parallel/tensor_parallel_linear.h"

namespace {

struct Fit {
  int64_t layers = 0, params = 0;
  mt::MemoryClasses bytes;
};

enum class Bytes { kZero1, kZero3, kBefore };

mt::MemoryClasses predict(int64_t layers, int64_t hidden, int64_t seq, int64_t dp, Bytes mode) {
  mt::ModelConfig c;
  c.num_layers = layers;
  c.hidden_size = hidden;
  c.num_attention_heads = hidden / 128;
  c.ffn_hidden_size = 4 * hidden;
  c.seq_length = c.max_position_embeddings = seq;
  c.vocab_size = 50257;
  c.finalize(1);
  const mt::ParamRegistry reg(c, mt::StageLayout{0, 1, 0, layers, true, true});
  mt::MemoryPlan p = mt::memory_plan(reg, 1, mt::TensorParallel{}, 1, mt::Recompute{"uniform", 1},
                                     mt::MathMode::kBF16, dp, true);
  if (mode == Bytes::kZero3) {
    const mt::GradPlacement g = mt::plan_staged_grads(reg);
    p.grads_staged = g.floats;
    p.params_staged = g.weight_floats;
  }
  if (mode != Bytes::kBefore) return mt::predict_memory(p);
  // Before: bf16 workspace, fp32 activation records, 10 + 8/d bytes per parameter.
  mt::MemoryClasses m = mt::predict_memory(p);
  p.math = "fp32";
  const mt::MemoryClasses f = mt::predict_memory(p);
  const double params = double(reg.total_floats());
  m.activations = f.activations;
  m.params = 6.0 * params;
  m.grads = 4.0 * params;
  m.optimizer = 8.0 * params / double(dp);
  return m;
}

Fit largest(double budget, int64_t hidden, int64_t seq, int64_t dp, Bytes mode) {
  Fit best;
  for (int64_t layers = 1; layers <= 1000; ++layers) {
    const mt::MemoryClasses m = predict(layers, hidden, seq, dp, mode);
    if (m.total() > budget) break;
    best.layers = layers;
    best.bytes = m;
    mt::ModelConfig c;
    c.num_layers = layers;
    c.hidden_size = hidden;
    c.ffn_hidden_size = 4 * hidden;
    c.seq_length = c.max_position_embeddings = seq;
    c.vocab_size = 50257;
    c.finalize(1);
    best.params = mt::count_parameters(c);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double budget_gb = 20.0;
  int64_t hidden = 2048, seq = 2048, dp = 2;
  CLI::App app{"The largest GPT (hidden H, H/128 heads, seq S) that fits a per-rank memory "
               "budget at DP with ZeRO-1 or ZeRO-3, bf16 and full recompute, by the prediction "
               "`megatron train` uses; one JSON line each, and one before bf16 matched "
               "Megatron's bytes",
               "bench_largest_model"};
  app.add_option("budget_gb", budget_gb, "per-rank budget in GB (default 20)")
      ->check(at_least(1));
  app.add_option("hidden", hidden, "hidden size, a multiple of 128 (default 2048)")
      ->check(at_least(1));
  app.add_option("seq", seq, "sequence length (default 2048)")->check(at_least(1));
  app.add_option("dp", dp, "data-parallel size (default 2)")->check(at_least(1));
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  return run_bench([&] {
    MT_CHECK(hidden % 128 == 0, "hidden ", hidden, " is not a multiple of 128 (heads of 128 "
             "features); fix: give e.g. ", (hidden / 128 + 1) * 128);
    const std::pair<Bytes, const char*> modes[] = {
        {Bytes::kZero1, "now, ZeRO-1 (6 + 12/d, bf16 activations)"},
        {Bytes::kZero3, "now, ZeRO-3 optim_grads_params (18/d + pools, bf16 activations)"},
        {Bytes::kBefore, "before (10 + 8/d, fp32 activations)"}};
    for (const auto& [mode, name] : modes) {
      const Fit f = largest(budget_gb * 1e9, hidden, seq, dp, mode);
      std::printf(
          "{\"bench\":\"largest_model\",\"bytes\":\"%s\",\"budget_gb\":%.1f,\"hidden\":%lld,"
          "\"seq\":%lld,\"dp\":%lld,\"layers\":%lld,\"params\":%lld,\"predicted_gb\":{\"params\":%.2f,"
          "\"grads\":%.2f,\"optimizer\":%.2f,\"activations\":%.2f,\"workspace\":%.2f,\"total\":%.2f}}\n",
          name, budget_gb, (long long)hidden, (long long)seq, (long long)dp, (long long)f.layers,
          (long long)f.params, f.bytes.params / 1e9, f.bytes.grads / 1e9, f.bytes.optimizer / 1e9,
          f.bytes.activations / 1e9, f.bytes.workspace / 1e9, f.bytes.total() / 1e9);
    }
    return 0;
  });
}
