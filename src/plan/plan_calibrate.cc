#include "plan/plan_calibrate.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iterator>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "memory/host_memory.h"

namespace mt {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best seconds of `fn` over at least `reps` runs and ~0.1 s (after a warm-up).
double best_seconds(const std::function<void()>& fn, int reps) {
  fn();
  double best = 1e30, total = 0;
  for (int r = 0; r < reps || (total < 0.1 && r < 50); ++r) {
    const double t0 = now();
    fn();
    const double dt = now() - t0;
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

// Bytes per second of a triad a = b + s·c over arrays of n floats (32M: 3 x
// 128 MB): best of 5 (two reads and a write per element).
double triad_bandwidth(int64_t floats) {
  const size_t n = size_t(floats);
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

// FLOP/s of one linear layer's three GEMMs (forward, input and weight
// gradients) over `rows` tokens, as the model runs them (weights bf16 in bf16).
double linear_layer_flops(int64_t rows, int64_t in, int64_t out, MathMode math, int reps) {
  std::vector<float> x(size_t(rows * in), 0.01f), w(size_t(out * in), 0.01f);
  std::vector<float> y(size_t(rows * out)), dy(size_t(rows * out), 0.01f);
  std::vector<float> dx(size_t(rows * in)), dw(size_t(out * in));
  std::vector<uint16_t> w16(w.size());
  f32_to_bf16(w16.data(), w.data(), int64_t(w.size()));
  const Compute cm{math};
  const ReadView wr = math == MathMode::kBF16 ? ReadView(w16.data()) : ReadView(w.data());
  const double sec = best_seconds([&] {
    linear_forward(y.data(), x.data(), wr, ReadView(), rows, in, out, cm);
    linear_backward(dx.data(), dw.data(), nullptr, dy.data(), x.data(), wr, rows, in, out, false,
                    cm);
  }, reps);
  return 3 * 2.0 * double(rows) * double(in) * double(out) / sec;
}

// FLOP/s of the causal attention core, forward + backward (FLOPs as plan
// counts them: forward 2·b·a·s²·d, backward 2.5 times that), head dim 64.
double attention_flops(int64_t s, MathMode math, float p, int reps) {
  const int64_t d = 64, ba = std::max<int64_t>(1, (int64_t(1) << 23) / (s * s));  // ~1 GFLOP fwd
  const AttentionDims dims{1, ba, s, d, math};
  const size_t n = size_t(ba * s * d);
  std::vector<float> q(n, 0.05f), k(n, 0.04f), v(n, 0.03f), dctx(n, 0.01f), ctx(n), dq(n), dk(n),
      dv(n), lse(size_t(ba * s)), ws(size_t(attention_workspace_floats(dims)));
  std::vector<uint16_t> q16(n), k16(n), v16(n);
  f32_to_bf16(q16.data(), q.data(), int64_t(n));
  f32_to_bf16(k16.data(), k.data(), int64_t(n));
  f32_to_bf16(v16.data(), v.data(), int64_t(n));
  const bool bf16 = math == MathMode::kBF16;
  const ReadView qv = bf16 ? ReadView(q16.data()) : ReadView(q.data());
  const ReadView kv = bf16 ? ReadView(k16.data()) : ReadView(k.data());
  const ReadView vv = bf16 ? ReadView(v16.data()) : ReadView(v.data());
  AttentionDropout drop;
  drop.rng = RngStream::make(1, "calibrate_attention");
  drop.p = p;
  const double sec = best_seconds([&] {
    attention_forward(ctx.data(), lse.data(), qv, kv, vv, dims, drop, ws.data());
    attention_backward(dq.data(), dk.data(), dv.data(), dctx.data(), qv, kv, vv, ctx.data(),
                       lse.data(), dims, drop, ws.data());
  }, reps);
  return 3.5 * 2.0 * double(ba) * double(s) * double(s) * double(d) / sec;
}

// Seconds of `op` (a collective over `world`), best of `reps`, all ranks in step.
double collective_time(const Communicator& world, const std::function<void()>& op, int reps) {
  op();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    world.barrier();
    const double t0 = now();
    op();
    best = std::min(best, now() - t0);
  }
  double out = best;
  world.all_reduce_max(&out, 1);  // the slowest rank's
  return out;
}

// One-way seconds of an n-float message between ranks 0 and 1 (half a ping-pong).
double p2p_time(const Communicator& world, std::vector<float>& x, int64_t n, int reps) {
  const int rank = world.rank();
  return collective_time(world, [&] {
    if (rank == 0) {
      world.send(x.data(), n, 1, 7);
      world.recv(x.data(), n, 1, 7);
    } else if (rank == 1) {
      world.recv(x.data(), n, 0, 7);
      world.send(x.data(), n, 0, 7);
    }
  }, reps) / 2;
}

// α–β of each collective this program runs (the TP/SP calls and send/recv),
// from a 1-float-per-rank and a 4 MB buffer: α from the small one per ring
// step, β from the large one less its steps' α.
void measure_collectives(const Communicator& world, LinkProfile& link,
                         const CalibrateOptions& opt) {
  const int small = opt.small_reps, large = opt.big_reps;
  const int64_t p = world.size(), big = int64_t(1) << 20;  // floats of the whole buffer
  const double q = double(p);
  std::vector<float> in(size_t(big), 1.f), out(size_t(big), 0.f);
  auto fit = [&](double t_small, double t_big, double steps, double fraction) {
    const double alpha = std::max(t_small / steps, 1e-8);
    const double moved = fraction * double(big) * 4;
    return AlphaBeta{moved / std::max(t_big - steps * alpha, 1e-9), alpha};
  };
  auto ar = [&](int64_t n) { return [&, n] { world.all_reduce_sum(in.data(), n); }; };
  auto rs = [&](int64_t n) {
    return [&, n] { world.reduce_scatter_sum(out.data(), in.data(), n / p); };
  };
  auto ag = [&](int64_t n) { return [&, n] { world.all_gather(out.data(), in.data(), n / p); }; };
  using C = Collective;
  link.collectives[size_t(C::kAllReduce)] =
      fit(collective_time(world, ar(p), small), collective_time(world, ar(big), large), 2 * (q - 1),
          2 * (q - 1) / q);
  link.collectives[size_t(C::kReduceScatter)] =
      fit(collective_time(world, rs(p), small), collective_time(world, rs(big), large), q - 1,
          (q - 1) / q);
  link.collectives[size_t(C::kAllGather)] =
      fit(collective_time(world, ag(p), small), collective_time(world, ag(big), large), q - 1,
          (q - 1) / q);
  link.collectives[size_t(C::kP2p)] =
      fit(p2p_time(world, in, 1, small), p2p_time(world, in, big, large), 1, 1);
  link.bandwidth_bytes_per_s = link.collectives[size_t(C::kAllReduce)].bandwidth_bytes_per_s;
  link.latency_s = link.collectives[size_t(C::kAllReduce)].latency_s;
}

// The smallest value over the ranks that measured (the slowest rank's rate:
// a step waits for it); ranks that did not pass `measured` false.
double min_over(const Communicator& world, double x, bool measured) {
  double neg = measured ? -x : -1e300;
  world.all_reduce_max(&neg, 1);
  return -neg;
}

}  // namespace

int host_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

DeviceProfile calibrate_device(const Communicator& world, const std::string& name,
                               const CalibrateOptions& opt) {
  DeviceProfile d;
  d.name = name;
  const int ranks = world.size(), cores = host_cores();
  d.cores_per_node = cores;
  // Compute is measured by min(ranks, cores) ranks at once, each on the
  // threads it was launched with: a rank's rate while the cores are shared
  // but not oversubscribed (plan adds the node-wide bound when ranks > cores).
  const bool measures = world.rank() < std::min(ranks, cores);
  // GEMMs as the model runs them (linear layers over 2048 tokens; quick: 512): square
  // weights of 128..1024 and a vocabulary-like 512 -> 16384 (the logits).
  const int64_t shapes[][2] = {{128, 128}, {256, 256}, {512, 512}, {1024, 1024}, {512, 16384}};
  const int64_t rows = opt.rows;
  for (MathMode math : {MathMode::kF32, MathMode::kBF16}) {
    std::vector<double> rate(std::size(shapes), 0.0);
    // Best of two rounds: other work on a shared host only slows a run down.
    for (int round = 0; round < opt.rounds; ++round)
      for (size_t i = 0; i < rate.size(); ++i) {
        world.barrier();
        if (measures)
          rate[i] = std::max(
              rate[i], linear_layer_flops(rows, shapes[i][0], shapes[i][1], math, opt.reps));
      }
    for (double& r : rate) r = min_over(world, r, measures);
    const double peak = *std::max_element(rate.begin(), rate.end());
    auto& curve = math == MathMode::kF32 ? d.gemm_efficiency : d.gemm_efficiency_bf16;
    for (size_t i = 0; i < rate.size(); ++i)
      curve.push_back(
          {2.0 * double(rows) * double(shapes[i][0]) * double(shapes[i][1]), rate[i] / peak});
    (math == MathMode::kF32 ? d.peak_flops_fp32 : d.peak_flops_bf16) = peak;
  }
  for (int64_t s : {256, 1024, 4096}) {
    DeviceProfile::AttentionRate r;
    r.seq_length = double(s);
    double* out[] = {&r.fp32, &r.fp32_dropout, &r.bf16, &r.bf16_dropout};
    int k = 0;
    for (MathMode math : {MathMode::kF32, MathMode::kBF16})
      for (float p : {0.f, 0.1f}) {
        world.barrier();
        *out[k++] = min_over(world, measures ? attention_flops(s, math, p, opt.reps) : 0, measures);
      }
    d.attention.push_back(r);
  }
  world.barrier();
  d.memory_bandwidth_bytes_per_s =
      min_over(world, measures ? triad_bandwidth(opt.triad_floats) : 0, measures);
  const int64_t avail = available_host_memory_bytes();
  MT_CHECK(avail > 0, "calibration: cannot read the host's available memory (/proc/meminfo)");
  d.memory_bytes = double(avail) / double(ranks);
  d.bf16_activations_on_wire = false;  // this program's TP/PP messages are fp32
  char src[700];
  std::snprintf(src, sizeof src,
                "megatron plan --calibrate%s on %d rank(s) of this host (%d cores; compute "
                "measured by %d rank(s) at once): oneDNN linear layers (forward + both backward "
                "GEMMs) over %lld rows, 128^2..1024^2 and 512x16384, fp32 and bf16; the "
                "attention core at seq 256/1024/4096, with and without dropout; a 3 x %lld MB "
                "triad; MemAvailable / ranks",
                opt.rows == CalibrateOptions{}.rows ? "" : "-quick", ranks, cores,
                std::min(ranks, cores), static_cast<long long>(rows),
                static_cast<long long>(opt.triad_floats * 4 >> 20));
  d.source = src;
  if (ranks >= 2) {
    measure_collectives(world, d.intra_node, opt);
    d.inter_node = d.intra_node;
    d.source += "; links: this program's all-reduce, reduce-scatter, all-gather over all ranks "
                "and a ping-pong between ranks 0 and 1, 4 bytes per rank (latency) and 4 MB "
                "(bandwidth); inter_node = intra_node (one host measured)";
  } else {
    d.intra_node = d.inter_node = {d.memory_bandwidth_bytes_per_s / 3 * 2, 1e-6};
    d.source += "; links: not measured (1 rank): the triad's rate and 1 us stand in; run under "
                "mpirun -n 2 to measure them";
  }
  return d;
}

}  // namespace mt
