// The data-parallel gradient reduction alone, fp32 against bf16 on the wire
// (--grad-reduce-in-bf16): GradBuckets over a model's whole gradient buffer
// (the `small` and GPT-2 small (`b`) shapes of bench_train, one pipeline
// stage, no TP), all-reduce or the distributed optimizer's reduce-scatter,
// 1M-float buckets (the training default). Every iteration restores the
// gradients, waits at a barrier (so no rank's lateness is counted, unlike a
// training step's communication time) and times mark_ready of every
// parameter plus finish(): the rounding to bf16, the collectives and the
// widening back, and the 1/DP average. One JSON line per result, rank 0:
// the median over iterations of the slowest rank's time, and of the largest
// MPI and conversion shares (GradBuckets::comm_seconds / convert_seconds),
// and the bytes each rank hands to MPI per iteration.
// Usage: mpirun -n 2 bench_grad_reduce [small|b] [iters] [--zero] [--overlap] [--threads T]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "core/log.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "model/params.h"
#include "optim/grad_buckets.h"

namespace {

struct Shape {
  const char* name;
  int64_t layers, heads, hidden, seq, vocab;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(const mt::ParamRegistry& reg, const char* name, const mt::ParallelState& ps,
         int64_t iters, bool zero, bool overlap, bool bf16, int threads) {
  const mt::Communicator& dp = ps.dp_comm;
  std::vector<float> grads(size_t(reg.total_floats())), fresh(grads.size());
  std::mt19937 gen(1 + unsigned(ps.dp_rank));
  std::normal_distribution<float> normal(0.f, 1e-3f);
  for (float& g : fresh) g = normal(gen);
  mt::GradBuckets gb(reg, grads.data(), dp, 1'000'000, overlap, zero, bf16);
  std::vector<double> total, mpi, convert;
  for (int64_t it = -2; it < iters; ++it) {  // two warm-up iterations
    std::copy(fresh.begin(), fresh.end(), grads.begin());
    dp.barrier();
    gb.reset_timers();
    mt::Timer t;
    for (size_t p = reg.params().size(); p-- > 0;) gb.mark_ready(p);  // backward's order
    gb.finish();
    double row[3] = {t.seconds(), gb.comm_seconds(), gb.convert_seconds()};
    dp.all_reduce_max(row, 3);  // the slowest rank sets the pace
    if (it < 0) continue;
    total.push_back(row[0]);
    mpi.push_back(row[1]);
    convert.push_back(row[2]);
  }
  if (ps.world_rank != 0) return;
  std::printf(
      "{\"bench\":\"grad_reduce\",\"config\":\"%s\",\"dp\":%d,\"threads\":%d,\"zero\":%s,"
      "\"overlap\":%s,\"wire\":\"%s\",\"floats\":%lld,\"buckets\":%zu,\"bytes_per_rank\":%lld,"
      "\"iters\":%lld,\"ms\":%.2f,\"mpi_ms\":%.2f,\"convert_ms\":%.2f}\n",
      name, dp.size(), threads, zero ? "true" : "false", overlap ? "true" : "false",
      bf16 ? "bf16" : "fp32", (long long)reg.total_floats(), gb.buckets().size(),
      (long long)gb.reduced_bytes(), (long long)iters, 1e3 * median(total), 1e3 * median(mpi),
      1e3 * median(convert));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "small";
  int64_t iters = 20;
  int threads = 1;
  bool zero = false, overlap = false;
  CLI::App app{"The data-parallel gradient reduction alone, fp32 against bf16 on the wire: one "
               "JSON line per result (launch with mpirun; DP = world)",
               "bench_grad_reduce"};
  app.add_option("config", which, "small | b (default small)")
      ->check(CLI::IsMember({"small", "b"}));
  app.add_option("iters", iters, "timed iterations (default 20)")->check(at_least(1));
  app.add_flag("--zero", zero, "the distributed optimizer's reduce-scatter instead of all-reduce");
  app.add_flag("--overlap", overlap, "start each bucket as soon as it is complete");
  app.add_option("--threads", threads, "OpenMP threads (default 1)")->check(at_least(1));
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  return run_bench([&] {
    mt::MpiEnv mpi(&argc, &argv);
    omp_set_num_threads(threads);
    mt::ParallelState ps(mt::ParallelConfig{});  // DP = world
    const Shape shape = which == "b" ? Shape{"b", 12, 12, 768, 1024, 50304}
                                     : Shape{"small", 6, 6, 384, 256, 50304};
    mt::ModelConfig c;
    c.num_layers = shape.layers;
    c.num_attention_heads = shape.heads;
    c.hidden_size = shape.hidden;
    c.seq_length = shape.seq;
    c.vocab_size = shape.vocab;
    c.finalize(1);
    const mt::ParamRegistry reg(c, mt::StageLayout{0, 1, 0, shape.layers, true, true});
    for (bool bf16 : {false, true}) run(reg, shape.name, ps, iters, zero, overlap, bf16, threads);
    return 0;
  });
}
