#include "train/plan_calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <vector>

#include "core/error.h"
#include "kernels/matmul.h"
#include "train/host_memory.h"

namespace mt {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Bytes per second of a triad a = b + s·c over arrays of 32M floats (3 x 128 MB):
// best of 5 (two reads and a write per element).
double triad_bandwidth() {
  const size_t n = size_t(32) << 20;
  std::vector<float> a(n, 0.f), b(n, 1.f), c(n, 2.f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now();
#pragma omp parallel for
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
    best = std::max(best, 3.0 * 4.0 * double(n) / (now() - t0));
  }
  MT_CHECK(a[n / 2] == 2.f, "calibration: triad produced ", a[n / 2], " (internal error)");
  return best;
}

// Seconds per all-reduce of n floats over `world`, best of `reps`.
double all_reduce_time(const Communicator& world, int64_t n, int reps) {
  std::vector<float> x(size_t(n), 1.f);
  world.all_reduce_sum(x.data(), n);  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    world.barrier();
    const double t0 = now();
    world.all_reduce_sum(x.data(), n);
    best = std::min(best, now() - t0);
  }
  return best;
}

// One-way seconds of an n-float message between ranks 0 and 1 (half a ping-pong).
double p2p_time(const Communicator& world, int64_t n, int reps) {
  std::vector<float> x(size_t(n), 1.f);
  const int rank = world.rank();
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    world.barrier();
    const double t0 = now();
    if (rank == 0) {
      world.send(x.data(), n, 1, 7);
      world.recv(x.data(), n, 1, 7);
    } else if (rank == 1) {
      world.recv(x.data(), n, 0, 7);
      world.send(x.data(), n, 0, 7);
    }
    if (r > 0) best = std::min(best, (now() - t0) / 2);
  }
  double out = best;
  world.broadcast(&out, sizeof out, 0);
  return out;
}

// The smallest value over the ranks (the slowest rank's rate: a step waits for it).
double min_over(const Communicator& world, double x) {
  double neg = -x;
  world.all_reduce_max(&neg, 1);
  return -neg;
}

}  // namespace

DeviceProfile calibrate_device(const Communicator& world, const std::string& name) {
  DeviceProfile d;
  d.name = name;
  const int ranks = world.size();
  // GEMMs: every rank at once, as ranks of a training run share the host.
  const int64_t sizes[] = {128, 256, 512, 1024, 2048};
  // Best of three rounds (each itself a best of >= 5 runs): other work on a
  // shared host only ever slows a run down.
  std::vector<double> fp32(std::size(sizes), 0.0);
  double bf16 = 0;
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < fp32.size(); ++i) {
      world.barrier();
      fp32[i] = std::max(fp32[i], measure_matmul_peak_flops(sizes[i], MathMode::kF32));
    }
    world.barrier();
    bf16 = std::max(bf16, measure_matmul_peak_flops(2048, MathMode::kBF16));
  }
  for (double& r : fp32) r = min_over(world, r);
  const double bf16_min = min_over(world, bf16);
  d.peak_flops_fp32 = *std::max_element(fp32.begin(), fp32.end());
  d.peak_flops_bf16 = bf16_min;
  for (size_t i = 0; i < fp32.size(); ++i) {
    const double flops = 2.0 * double(sizes[i]) * double(sizes[i]) * double(sizes[i]);
    d.gemm_efficiency.push_back({flops, fp32[i] / d.peak_flops_fp32});
  }
  world.barrier();
  const double bw = min_over(world, triad_bandwidth());
  d.memory_bandwidth_bytes_per_s = bw;
  const int64_t avail = available_host_memory_bytes();
  MT_CHECK(avail > 0, "calibration: cannot read the host's available memory (/proc/meminfo)");
  d.memory_bytes = double(avail) / double(ranks);
  d.bf16_activations_on_wire = false;  // this program's TP/PP messages are fp32
  char src[512];
  std::snprintf(src, sizeof src,
                "megatron plan --calibrate on %d rank(s) of this host at once: oneDNN fp32 GEMMs "
                "of 128^3..2048^3 and bf16 2048^3 (slowest rank's best), a 3 x 128 MB triad, "
                "MemAvailable / ranks",
                ranks);
  d.source = src;
  if (ranks >= 2) {
    // Bandwidth from a 64 MB all-reduce (2(p-1)/p of it crosses each rank's
    // link), latency from a 1-float all-reduce (2(p-1) steps) and a ping-pong.
    const int64_t big = int64_t(16) << 20;
    const double q = double(ranks);
    const double t_big = all_reduce_time(world, big, 5);
    const double t_small = all_reduce_time(world, 1, 200);
    const double alpha = t_small / (2 * (q - 1));
    const double beta = 2 * (q - 1) / q * double(big) * 4 / std::max(t_big - 2 * (q - 1) * alpha, 1e-9);
    const double p2p_small = p2p_time(world, 1, 200);
    d.intra_node = {beta, std::max(alpha, p2p_small)};
    d.inter_node = d.intra_node;
    d.source += "; links: all-reduce of 64 MB (bandwidth) and of 4 bytes and a ping-pong "
                "(latency) between the ranks; inter_node = intra_node (one host measured)";
  } else {
    d.intra_node = d.inter_node = {bw / 3 * 2, 1e-6};
    d.source += "; links: not measured (1 rank): the triad's rate and 1 us stand in; run under "
                "mpirun -n 2 to measure them";
  }
  return d;
}

}  // namespace mt
