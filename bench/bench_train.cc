// Training-step throughput of megatron.cpp: forward + backward + clip + AdamW
// on random tokens, for the two shapes, at 1 and 2 threads, with the
// matmul peak measured in the same run. One JSON line per (config, threads).
//   config a: 4 layers, 4 heads, hidden 128, seq 64, micro-batch 12, vocab 65
//   config b: GPT-2 small: 12 layers, 12 heads, hidden 768, seq 1024, micro-batch 1, vocab 50304
// Usage: bench_train [a|b|all] [iters] [--tp N] [--sp] [--pp P] [--m M] [--last-stage-layers K] [--vpp V] [--threads T]
//                    [--bucket FLOATS] [--overlap]
// With --pp the iteration runs M micro-batches through the 1F1B schedule and
// the measured bubble (time blocked on neighbours / step time) is reported per
// stage next to the theory (P - 1) / M.
// Under mpirun the world is split TP x DP (DP = world / TP); each DP rank
// trains on its own micro-batch (the global batch grows with DP), rank 0
// prints, adding the layout and the communication time per iteration.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/log.h"
#include "dist/mpi_env.h"
#include "dist/parallel_state.h"
#include "kernels/matmul.h"
#include "optim/optimizer.h"
#include "pipeline/model_runtime.h"
#include "pipeline/schedules.h"
#include "train/metrics.h"
#include "train/train_step.h"

namespace {

struct BenchConfig {
  const char* name;
  int64_t layers, heads, hidden, seq, micro_batch, vocab, iters;
};

void run(const BenchConfig& bc, int threads, mt::ParallelState& ps, int64_t iters, bool sp,
         int64_t bucket_floats, bool overlap, int64_t m, int64_t last_stage_layers, int64_t vpp) {
  omp_set_num_threads(threads);
  const double peak = mt::measure_matmul_peak_flops();
  mt::ModelConfig c;
  c.num_layers = bc.layers;
  c.num_attention_heads = bc.heads;
  c.hidden_size = bc.hidden;
  c.seq_length = bc.seq;
  c.vocab_size = bc.vocab;
  c.hidden_dropout = c.attention_dropout = 0.f;
  c.finalize(ps.tp_size);
  const auto [lb, le] =
      mt::stage_layer_range(c.num_layers, ps.pp_size, ps.pp_rank, 0, last_stage_layers);
  mt::StageLayout stage{ps.tp_rank, ps.tp_size, lb, le, ps.pp_is_first_stage, ps.pp_is_last_stage};
  if (vpp > 1) stage.chunks = mt::virtual_stage_chunks(c.num_layers, ps.pp_size, ps.pp_rank, vpp);
  mt::ParamRegistry reg(c, stage);
  mt::ModelRuntime rt(reg, bc.micro_batch, mt::TensorParallel{&ps.tp_comm, sp},
                      vpp > 1 ? mt::max_in_flight_interleaved(ps.pp_size, ps.pp_rank, int(vpp), m)
                              : mt::max_in_flight_1f1b(ps.pp_size, ps.pp_rank, m));
  reg.initialize(rt.params, 1234);
  mt::AdamWOptimizer opt(reg, mt::OptimizerConfig{});
  mt::GradSync sync(rt, ps, bucket_floats, overlap);
  std::mt19937 gen(1 + unsigned(ps.dp_rank));  // the same tokens on every TP rank
  auto next = [&](int64_t, int32_t* tokens, int32_t* labels) {
    for (int64_t i = 0; i < rt.sh.tokens(); ++i) {
      tokens[i] = int32_t(gen() % uint32_t(bc.vocab));
      labels[i] = int32_t(gen() % uint32_t(bc.vocab));
    }
    return int64_t(0);
  };
  const int64_t tokens = bc.seq * bc.micro_batch * ps.dp_size * m;  // per iteration, all DP ranks
  const auto ops = mt::training_schedule(ps.pp_size, ps.pp_rank, int(vpp), m);
  for (int i = 0; i < 2; ++i)  // warm-up
    mt::train_step(rt, opt, sync, ps, ops, i + 1, 1e-4, m, tokens, 1, next);
  ps.world_comm.barrier();
  sync.reset_timers();
  mt::Timer t;
  double wait = 0;
  for (int64_t i = 0; i < iters; ++i)
    wait += mt::train_step(rt, opt, sync, ps, ops, i + 3, 1e-4, m, tokens, 1, next).wait_seconds;
  const double sec = t.seconds() / double(iters);
  std::vector<float> bubble(size_t(ps.pp_size));
  const float mine = float(wait / double(iters) / sec);
  ps.pp_comm.all_gather(bubble.data(), &mine, 1);
  std::string bubbles = "[";
  for (size_t i = 0; i < bubble.size(); ++i) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? "," : "", bubble[i]);
    bubbles += buf;
  }
  bubbles += "]";
  const double comm_ms = 1e3 * sync.comm_seconds() / double(iters);
  const double flops = mt::flops_per_iteration(c, bc.micro_batch * ps.dp_size * m);
  if (ps.world_rank != 0) return;
  std::printf(
      "{\"bench\":\"train\",\"impl\":\"megatron.cpp\",\"config\":\"%s\",\"layout\":\"%s%s\","
      "\"ranks\":%d,\"threads\":%d,\"comm_ms_per_iter\":%.2f,\"micro_batches\":%lld,"
      "\"bubble_per_stage\":%s,\"bubble_theory\":%.4f,"
      "\"layers\":%lld,\"hidden\":%lld,\"heads\":%lld,\"seq\":%lld,\"micro_batch\":%lld,"
      "\"vocab\":%lld,\"iters\":%lld,\"ms_per_iter\":%.2f,\"tokens_per_s\":%.1f,"
      "\"tflops\":%.4f,\"peak_tflops\":%.4f,\"mfu\":%.4f}\n",
      bc.name, ps.layout().c_str(), sp ? "-SP" : "", ps.world_size, threads, comm_ms,
      (long long)m, bubbles.c_str(), double(ps.pp_size - 1) / double(vpp * m),
      (long long)bc.layers, (long long)bc.hidden, (long long)bc.heads,
      (long long)bc.seq, (long long)bc.micro_batch, (long long)bc.vocab, (long long)iters,
      sec * 1e3, double(tokens) / sec, flops / sec / 1e12 / ps.world_size, peak / 1e12,
      flops / sec / ps.world_size / peak);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  mt::MpiEnv mpi(&argc, &argv);
  std::string which = "all";
  int64_t iters = 0;
  int tp = 1, pp = 1, threads = 0;
  int64_t m = 1, last_stage_layers = 0, vpp = 1;
  bool sp = false, overlap = false;
  int64_t bucket = 1'000'000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tp" && i + 1 < argc) tp = std::atoi(argv[++i]);
    else if (a == "--pp" && i + 1 < argc) pp = std::atoi(argv[++i]);
    else if (a == "--m" && i + 1 < argc) m = std::stoll(argv[++i]);
    else if (a == "--last-stage-layers" && i + 1 < argc) last_stage_layers = std::stoll(argv[++i]);
    else if (a == "--vpp" && i + 1 < argc) vpp = std::stoll(argv[++i]);
    else if (a == "--sp") sp = true;
    else if (a == "--overlap") overlap = true;
    else if (a == "--bucket" && i + 1 < argc) bucket = std::stoll(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "a" || a == "b" || a == "all") which = a;
    else iters = std::stoll(a);
  }
  mt::ParallelConfig pc;
  pc.tp = tp;
  pc.pp = pp;
  mt::ParallelState ps(pc);
  const BenchConfig a{"a", 4, 4, 128, 64, 12, 65, 200};
  const BenchConfig b{"b", 12, 12, 768, 1024, 1, 50304, 5};
  for (const BenchConfig* bc : {&a, &b}) {
    if (which != "all" && which != bc->name) continue;
    const int64_t n = iters > 0 ? iters : bc->iters;
    if (threads > 0) {
      run(*bc, threads, ps, n, sp, bucket, overlap, m, last_stage_layers, vpp);
    } else {
      for (int t : {1, 2}) run(*bc, t, ps, n, sp, bucket, overlap, m, last_stage_layers, vpp);
    }
  }
  return 0;
}
