#include "plan/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "observe/metrics.h"

namespace mt {

std::vector<PlanResult> evaluate_layouts(const PlanProblem& pb, const std::vector<PlanLayout>& ls,
                                         const PlanCluster& c) {
  // Parameter lists depend on TP, PP, virtual stages, EP and the stage only.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<ParamRegistry>>
      regs;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, NodeCrossing> crossings;
  std::map<int64_t, ModelConfig> models;
  auto reg = [&](const PlanLayout& l, int64_t stage) -> const ParamRegistry& {
    auto& r = regs[{l.tp, l.pp, l.vp, l.ep, stage}];
    if (!r) r = std::make_unique<ParamRegistry>(stage_registry(pb, l, stage));
    return *r;
  };
  std::vector<PlanResult> out;
  for (const PlanLayout& l : ls) {
    PlanResult r;
    r.layout = l;
    r.num_micro_batches = pb.global_batch_size / (l.micro_batch_size * l.dp);
    const ParamRegistry& first = reg(l, 0);
    const ParamRegistry& last = reg(l, l.pp - 1);
    r.memory.first = predict_memory(layout_memory_plan(pb, l, 0, first));
    r.memory.last = l.pp == 1 ? r.memory.first
                              : predict_memory(layout_memory_plan(pb, l, l.pp - 1, last));
    r.fits = r.most_loaded_bytes() <= c.device.memory_bytes;
    auto x = crossings.find({l.tp, l.pp, l.cp, l.ep});
    if (x == crossings.end())
      x = crossings.emplace(std::make_tuple(l.tp, l.pp, l.cp, l.ep), node_crossing_of(l, c)).first;
    r.crossing = x->second;
    auto mc = models.find(l.tp);
    if (mc == models.end()) {
      ModelConfig m = pb.model;
      m.finalize(l.tp);
      mc = models.emplace(l.tp, m).first;
    }
    r.time = predict_step_time(mc->second, pb, l, c, r.crossing, first, last);
    const double step = r.time.total();
    r.tokens_per_s = double(pb.global_batch_size * pb.model.seq_length) / step;
    r.tflops_per_device =
        flops_per_iteration(mc->second, pb.global_batch_size) / step / double(l.world()) / 1e12;
    r.mfu = r.tflops_per_device * 1e12 / c.device.peak_flops(l.bf16);
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const PlanResult& a, const PlanResult& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.tokens_per_s > b.tokens_per_s;
    return a.most_loaded_bytes() < b.most_loaded_bytes();
  });
  return out;
}

nlohmann::json plan_result_json(const PlanResult& r) {
  const PlanLayout& l = r.layout;
  const MemoryClasses& m = r.memory.most_loaded();
  nlohmann::json j = {{"tp", l.tp},
                      {"pp", l.pp},
                      {"vp", l.vp},
                      {"dp", l.dp},
                      {"cp", l.cp},
                      {"micro_batch_size", l.micro_batch_size},
                      {"num_micro_batches", r.num_micro_batches},
                      {"sequence_parallel", l.sequence_parallel},
                      {"recompute", l.recompute},
                      {"distributed_optimizer", l.distributed_optimizer},
                      {"sharding", !l.distributed_optimizer ? "no_shard"
                                   : l.sharding.empty()     ? "optim"
                                                            : l.sharding.c_str()},
                      {"precision", l.bf16 ? "bf16" : "fp32"},
                      {"memory",
                       {{"weight_and_optimizer_bytes", m.params + m.grads + m.optimizer},
                        {"activation_bytes", m.activations + m.workspace},
                        {"total_bytes", m.total()}}},
                      {"step_time_s", r.time.total()},
                      {"tokens_per_s", r.tokens_per_s},
                      {"tflops_per_device", r.tflops_per_device},
                      {"mfu", r.mfu},
                      {"fits", r.fits}};
  // --async-save: its host copy, part of total_bytes.
  if (m.async_save > 0) j["memory"]["async_save_bytes"] = m.async_save;
  return j;
}

namespace {

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

std::string classes_line(const char* stage, const MemoryClasses& m) {
  return std::string("  ") + stage +
         fmt(": params %.2f GB, grads %.2f GB, optimizer %.2f GB", m.params / 1e9, m.grads / 1e9,
             m.optimizer / 1e9) +
         fmt(", activations %.2f GB, workspace %.2f GB", m.activations / 1e9, m.workspace / 1e9) +
         (m.async_save > 0 ? fmt(", async save copy %.2f GB", m.async_save / 1e9) : std::string()) +
         fmt(", total %.2f GB\n", m.total() / 1e9);
}

std::string time_line(const StepTime& t) {
  return fmt("compute %.3f s (recompute %.3f), bubble %.3f s", t.compute, t.recompute, t.bubble) +
         fmt(", TP %.3f s, PP %.3f s", t.tp_comm, t.pp_comm) +
         (t.cp_comm > 0 ? fmt(", CP ring %.3f s", t.cp_comm) : std::string()) +
         (t.ep_comm > 0 ? fmt(", EP all-to-all %.3f s", t.ep_comm) : std::string()) +
         fmt(", DP %.3f s, optimizer %.3f s", t.dp_comm, t.optimizer) +
         (t.shared > 0 ? fmt(", ranks sharing cores %.3f s", t.shared) : std::string());
}

}  // namespace

std::string misfit_reason(const PlanResult& r, const PlanCluster& c) {
  const bool first = r.memory.first.total() >= r.memory.last.total();
  const MemoryClasses& m = r.memory.most_loaded();
  std::pair<double, const char*> big[] = {{m.params + m.grads, "weights and gradients"},
                                          {m.optimizer, "optimizer state"},
                                          {m.activations, "activations"},
                                          {m.workspace, "workspace"}};
  std::sort(std::begin(big), std::end(big), [](auto& a, auto& b) { return a.first > b.first; });
  return r.layout.name() + ": the " + (first ? "first" : "last") + " pipeline stage needs " +
         fmt("%.2f GB per rank, the device has %.2f GB: %.2f GB over", m.total() / 1e9,
             c.device.memory_bytes / 1e9, (m.total() - c.device.memory_bytes) / 1e9) +
         " (largest: " + big[0].second + fmt(" %.2f GB)", big[0].first / 1e9);
}

std::string why_faster(const PlanResult& a, const PlanResult& b) {
  const StepTime &x = a.time, &y = b.time;
  std::vector<std::pair<double, std::string>> parts = {
      {(y.compute - y.recompute) - (x.compute - x.recompute), "compute"},
      {y.recompute - x.recompute, "recompute"},
      {y.bubble - x.bubble, "pipeline bubble"},
      {y.tp_comm - x.tp_comm,
       std::string("TP traffic") + (b.crossing.tp > 1 ? " (across nodes)" : "")},
      {y.pp_comm - x.pp_comm, std::string("PP p2p") + (b.crossing.pp > 1 ? " (across nodes)" : "")},
      {y.cp_comm - x.cp_comm, "CP ring"},
      {y.ep_comm - x.ep_comm,
       std::string("EP all-to-all") + (b.crossing.ep > 1 ? " (across nodes)" : "")},
      {y.dp_comm - x.dp_comm, std::string("DP traffic") + (b.crossing.dp > 1 ? " (across nodes)" : "")},
      {y.optimizer - x.optimizer, "optimizer step"},
      {y.shared - x.shared, "ranks sharing the node's cores"}};
  std::sort(parts.begin(), parts.end(), [](auto& p, auto& q) { return p.first > q.first; });
  // The parts where b loses at least 2% of a's step (at least the largest).
  std::string out = fmt("%.1f%% slower: ", 100 * (y.total() / x.total() - 1));
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].first > 0 && (i == 0 || parts[i].first > 0.02 * x.total()) && out.size() < 200)
      out += (i == 0 ? "" : ", ") + fmt("%.3f s", parts[i].first) + " more " + parts[i].second;
  return parts[0].first > 0 ? out : out + "no part larger (the same step)";
}

std::string format_plan(const PlanProblem& pb, const PlanCluster& c,
                        const std::vector<PlanResult>& results, int64_t top) {
  std::string out;
  int64_t fitting = 0;
  for (const PlanResult& r : results) fitting += r.fits;
  out += fmt("%.0f layouts, %.0f fit in %.1f GB per device", double(results.size()),
             double(fitting), c.device.memory_bytes / 1e9) +
         " (" + c.device.name + fmt(", %.0f nodes x %.0f devices)\n", double(c.nodes),
                                     double(c.devices_per_node));
  const size_t n = top > 0 ? std::min(results.size(), size_t(top)) : results.size();
  out += " #  layout                                      m   mem GB (first/last) fits  step s  "
         "tokens/s  TFLOP/s  MFU\n";
  for (size_t i = 0; i < n; ++i) {
    const PlanResult& r = results[i];
    char line[320];
    std::snprintf(line, sizeof line, "%2zu  %-42s %4lld  %8.2f / %-8.2f  %-4s %7.3f %9.0f %8.2f %5.1f%%\n",
                  i + 1, r.layout.name().c_str(), static_cast<long long>(r.num_micro_batches),
                  r.memory.first.total() / 1e9, r.memory.last.total() / 1e9,
                  r.fits ? "yes" : "no", r.time.total(), r.tokens_per_s, r.tflops_per_device,
                  100 * r.mfu);
    out += line;
  }
  if (results.empty()) return out;
  const PlanResult& best = results[0];
  out += "\nbest: " + best.layout.name() + " (" + best.crossing.describe() + ")\n";
  out += classes_line("first stage", best.memory.first);
  if (best.layout.pp > 1) out += classes_line("last stage ", best.memory.last);
  out += "  step: " + time_line(best.time) + "\n";
  if (!best.fits) {
    out += "nothing fits: " + misfit_reason(best, c) + "\n";
    return out;
  }
  out += "why:\n";
  for (size_t i = 1; i < std::min<size_t>(results.size(), 4); ++i)
    if (results[i].fits)
      out += fmt("  #1 beats #%.0f", double(i + 1)) + " (" + results[i].layout.name() + "): " +
             why_faster(best, results[i]) + "\n";
  (void)pb;
  return out;
}

}  // namespace mt
