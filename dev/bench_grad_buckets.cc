// Throwaway: speed of GradBuckets::finish() for GPT-2 small (~124M floats).
// Build by hand (not in CMake), run: mpirun -n 2 ./bench_grad_buckets [overlap]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/log.h"
#include "dist/communicator.h"
#include "dist/mpi_env.h"
#include "optim/grad_buckets.h"

int main(int argc, char** argv) {
  mt::MpiEnv env;
  const bool overlap = argc > 1 && std::atoi(argv[1]) != 0;
  mt::ModelConfig c;
  c.num_layers = 12; c.hidden_size = 768; c.num_attention_heads = 12; c.seq_length = 1024;
  c.vocab_size = 50257; c.make_vocab_size_divisible_by = 128; c.finalize(1);
  mt::ParamRegistry reg(c, mt::StageLayout{0, 1, 0, 12, true, true});
  mt::Communicator dp = mt::Communicator::world();
  std::vector<float> g(size_t(reg.total_floats()), 1.f);
  const int64_t bucket = std::max<int64_t>(40'000'000, 1'000'000 * dp.size());
  mt::GradBuckets gb(reg, g.data(), dp, bucket, overlap);
  for (int it = 0; it < 2; ++it) gb.finish();  // warm-up
  gb.reset_timers();
  const int iters = 10;
  double total = 0;
  for (int it = 0; it < iters; ++it) {
    dp.barrier();
    mt::Timer t;
    for (size_t p = reg.params().size(); p-- > 0;) gb.mark_ready(p);
    gb.finish();
    total += t.seconds();
  }
  const double gb_bytes = double(reg.total_floats()) * 4 / 1e9;
  if (dp.rank() == 0)
    std::printf("floats %ld buckets %zu overlap %d: finish %.3f s, %.2f GB/s (buffer bytes / time), comm %.3f s/it\n",
                long(reg.total_floats()), gb.buckets().size(), int(overlap), total / iters,
                gb_bytes * iters / total, gb.comm_seconds() / iters);
  return 0;
}
