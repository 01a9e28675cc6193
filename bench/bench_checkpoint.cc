// Checkpoint save/load time of a GPT-2-small-sized model (124M parameters,
// fp32, with AdamW state: ~1.5 GB on disk), and CRC-32C throughput.
// One JSON line per result. Usage: bench_checkpoint [--dir D] [--reps N]
// (D on the disk to measure; default /tmp). Each save goes through fsync, so
// it measures the disk; loads read from the page cache after the save.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "checkpoint/crc32c.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "model/config.h"
#include "model/params.h"
#include "optim/optimizer.h"
#include "checkpoint/checkpoint_io.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best of `reps` seconds of f().
template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

void bench_crc(int reps) {
  std::vector<unsigned char> buf(size_t(256) << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  volatile uint32_t sink = 0;
  const double gb = double(buf.size()) / 1e9;
  const double portable = best_of(reps, [&] { sink = mt::crc32c_extend_portable(0, buf.data(), buf.size()); });
  std::printf("{\"bench\": \"crc32c\", \"impl\": \"portable\", \"bytes\": %zu, \"GB_per_s\": %.2f}\n",
              buf.size(), gb / portable);
  if (mt::crc32c_hardware_available()) {
    const double hw = best_of(reps, [&] { sink = mt::crc32c_extend_hardware(0, buf.data(), buf.size()); });
    std::printf("{\"bench\": \"crc32c\", \"impl\": \"sse4.2_3way\", \"bytes\": %zu, \"GB_per_s\": %.2f}\n",
                buf.size(), gb / hw);
  }
  (void)sink;
}

}  // namespace

int main(int argc, char** argv) {
  std::string base = "/tmp";
  int reps = 3;
  CLI::App app{"Checkpoint save/load time of a GPT-2-small-sized model with AdamW state (~1.5 GB "
               "on disk, each save through fsync) and CRC-32C throughput: one JSON line per "
               "result",
               "bench_checkpoint"};
  app.add_option("--dir", base, "directory on the disk to measure (default /tmp)");
  app.add_option("--reps", reps, "repetitions, the best is reported (default 3)")
      ->check(at_least(1));
  if (const int rc = parse_bench_args(app, argc, argv); rc >= 0) return rc;
  return run_bench([&] {
    mt::MpiEnv mpi(&argc, &argv);
    bench_crc(reps);

    mt::ParallelState ps(mt::ParallelConfig{});
    mt::ModelConfig c;  // GPT-2 small
    c.num_layers = 12;
    c.num_attention_heads = 12;
    c.hidden_size = 768;
    c.seq_length = 1024;
    c.vocab_size = 50257;
    c.finalize(1);
    mt::ParamRegistry reg(c, mt::StageLayout{0, 1, 0, c.num_layers, true, true});
    std::vector<float> params(size_t(reg.total_floats()));
    for (size_t i = 0; i < params.size(); ++i) params[i] = float(int(i % 2001) - 1000) * 1e-4f;
    mt::AdamWOptimizer opt(reg, mt::OptimizerConfig{});
    mt::RunState st;
    st.iteration = 1;
    st.args = {{"model", mt::model_config_to_json(c)},
               {"tokenizer", {{"type", "NullTokenizer"}, {"vocab_size", c.vocab_size}}},
               {"layer_stage", std::vector<int>(size_t(c.num_layers), 0)}};
    const std::string dir = base + "/bench_checkpoint_" + std::to_string(::getpid());
    const double bytes = double(reg.total_floats()) * 4 * 3;  // weights + two moments
    const double save = best_of(reps, [&] {
      std::filesystem::remove_all(dir);
      mt::save_checkpoint(dir, st, reg, {mt::ReadView(params.data())}, &opt, ps);
    });
    std::printf("{\"bench\": \"checkpoint_save\", \"model\": \"gpt2-small\", \"params\": %lld, "
                "\"bytes\": %.0f, \"seconds\": %.3f, \"GB_per_s\": %.2f}\n",
                static_cast<long long>(reg.total_floats()), bytes, save, bytes / save / 1e9);
    std::fflush(stdout);
    std::vector<float> loaded(params.size());
    const double load = best_of(reps, [&] {
      mt::load_checkpoint(dir, reg, loaded.data(), &opt, ps);
    });
    std::printf("{\"bench\": \"checkpoint_load\", \"model\": \"gpt2-small\", \"bytes\": %.0f, "
                "\"seconds\": %.3f, \"GB_per_s\": %.2f, \"same\": %s}\n",
                bytes, load, bytes / load / 1e9, loaded == params ? "true" : "false");
    std::filesystem::remove_all(dir);
    return 0;
  });
}
