// Training-step throughput of megatron.cpp: forward + backward + clip + AdamW
// on random tokens, for the two shapes, at 1 and 2 threads, with the
// matmul peak measured in the same run. One JSON line per (config, threads).
//   config a: 4 layers, 4 heads, hidden 128, seq 64, micro-batch 12, vocab 65
//   config b: GPT-2 small: 12 layers, 12 heads, hidden 768, seq 1024, micro-batch 1, vocab 50304
// Usage: bench_train [a|b|all] [iters]
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "core/log.h"
#include "dist/mpi_env.h"
#include "dist/parallel_state.h"
#include "kernels/matmul.h"
#include "optim/optimizer.h"
#include "pipeline/model_runtime.h"
#include "train/metrics.h"
#include "train/train_step.h"

namespace {

struct BenchConfig {
  const char* name;
  int64_t layers, heads, hidden, seq, micro_batch, vocab, iters;
};

void run(const BenchConfig& bc, int threads, mt::ParallelState& ps, int64_t iters) {
  omp_set_num_threads(threads);
  const double peak = mt::measure_matmul_peak_flops();
  mt::ModelConfig c;
  c.num_layers = bc.layers;
  c.num_attention_heads = bc.heads;
  c.hidden_size = bc.hidden;
  c.seq_length = bc.seq;
  c.vocab_size = bc.vocab;
  c.hidden_dropout = c.attention_dropout = 0.f;
  c.finalize(1);
  mt::ParamRegistry reg(c, mt::StageLayout{0, 1, 0, c.num_layers, true, true});
  mt::ModelRuntime rt(reg, bc.micro_batch);
  reg.initialize(rt.params, 1234);
  mt::AdamWOptimizer opt(reg, mt::OptimizerConfig{});
  mt::GradSync sync(rt, ps, 40'000'000, false);
  std::mt19937 gen(1);
  auto next = [&](int64_t, int32_t* tokens, int32_t* labels) {
    for (int64_t i = 0; i < rt.sh.tokens(); ++i) {
      tokens[i] = int32_t(gen() % uint32_t(bc.vocab));
      labels[i] = int32_t(gen() % uint32_t(bc.vocab));
    }
    return int64_t(0);
  };
  const int64_t tokens = bc.seq * bc.micro_batch;
  for (int i = 0; i < 2; ++i) mt::train_step(rt, opt, sync, ps, i + 1, 1e-4, 1, tokens, 1, next);  // warm-up
  mt::Timer t;
  for (int64_t i = 0; i < iters; ++i) mt::train_step(rt, opt, sync, ps, i + 3, 1e-4, 1, tokens, 1, next);
  const double sec = t.seconds() / double(iters);
  const double flops = mt::flops_per_iteration(c, bc.micro_batch);
  std::printf(
      "{\"bench\":\"train\",\"impl\":\"megatron.cpp\",\"config\":\"%s\",\"threads\":%d,"
      "\"layers\":%lld,\"hidden\":%lld,\"heads\":%lld,\"seq\":%lld,\"micro_batch\":%lld,"
      "\"vocab\":%lld,\"iters\":%lld,\"ms_per_iter\":%.2f,\"tokens_per_s\":%.1f,"
      "\"tflops\":%.4f,\"peak_tflops\":%.4f,\"mfu\":%.4f}\n",
      bc.name, threads, (long long)bc.layers, (long long)bc.hidden, (long long)bc.heads,
      (long long)bc.seq, (long long)bc.micro_batch, (long long)bc.vocab, (long long)iters,
      sec * 1e3, double(tokens) / sec, flops / sec / 1e12, peak / 1e12, flops / sec / peak);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  mt::MpiEnv mpi(&argc, &argv);
  mt::ParallelState ps(mt::ParallelConfig{});
  const std::string which = argc > 1 ? argv[1] : "all";
  const BenchConfig a{"a", 4, 4, 128, 64, 12, 65, 200};
  const BenchConfig b{"b", 12, 12, 768, 1024, 1, 50304, 5};
  for (const BenchConfig* bc : {&a, &b}) {
    if (which != "all" && which != bc->name) continue;
    const int64_t iters = argc > 2 ? std::stoll(argv[2]) : bc->iters;
    for (int threads : {1, 2}) run(*bc, threads, ps, iters);
  }
  return 0;
}
