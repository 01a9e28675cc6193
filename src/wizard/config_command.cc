// `megatron config`: a few questions (the device and the cluster, the model,
// the sequence and batch, the layout: one of the fastest that `megatron plan`
// finds, or TP / SP / PP / DP, recompute, the distributed optimizer and the
// precision by hand) and a TOML file that `megatron train --config` and
// `megatron plan --config` read (wizard/config_toml.h).
#include "wizard/config_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <istream>
#include <ostream>

#include "checkpoint/atomic_file.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "plan/plan_calibrate.h"
#include "plan/plan_report.h"
#include "wizard/config_prompt.h"
#include "wizard/config_questions.h"
#include "wizard/config_toml.h"

namespace mt {

CLI::App* add_config_subcommand(CLI::App& parent) {
  return parent.add_subcommand(
      "config", "a few questions (cluster, model, layout from plan), then a TOML file for "
      "train --config and plan --config");
}

namespace {

// Layouts offered by rank (the rest: `megatron plan --config FILE`).
constexpr size_t kOffered = 5;

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  return buf;
}

// The shipped and calibrated device profiles (configs/devices), cpu-here first.
std::vector<std::string> device_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(devices_dir(), ec))
    if (f.path().extension() == ".json") names.push_back(f.path().stem().string());
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return (a == "cpu-here") != (b == "cpu-here") ? a == "cpu-here" : a < b;
  });
  return names;
}

// The device, machines, processes, threads and memory per process.
ConfigCluster ask_cluster(Prompter& p, DeviceProfile* profile) {
  ConfigCluster c;
  const std::vector<std::string> names = device_names();
  if (std::find(names.begin(), names.end(), "cpu-here") == names.end())
    p.say(
        "(cpu-here, this machine's measured profile, is offered once `mpirun -n P megatron "
        "plan --calibrate` has written it)");
  Question dev{"device",
               "Device profile (or a FILE.json)",
               names.empty() ? "" : names.front(),
               names,
               [&](const std::string& a) {
                 try {
                   *profile = load_device_profile(a);
                 } catch (const Error& e) {
                   return error_reason(e.what());
                 }
                 return std::string();
               },
               /*other_answers=*/true};
  c.device = p.ask(dev);
  const bool cpu = profile->cores_per_node > 0;
  c.machines = p.ask_int("machines", "How many machines", 1);
  c.processes_per_machine = p.ask_int("processes-per-machine", "Processes (ranks) per machine",
                                      cpu ? 1 : 8, [&](int64_t n) {
                                        try {
                                          plan_world_size(c.machines, n);
                                        } catch (const Error& e) {
                                          return error_reason(e.what());
                                        }
                                        return std::string();
                                      });
  c.threads_per_process = p.ask_int("threads-per-process", "Threads per process (OMP_NUM_THREADS)",
                                    std::max<int64_t>(1, host_cores() / c.processes_per_machine));
  c.memory_gb =
      p.ask_number("memory-per-process-gb", "Memory per process, GB", profile->memory_bytes / 1e9);
  profile->memory_bytes = c.memory_gb * 1e9;
  return c;
}

// Empty when `l` can run, else train's reason.
std::string layout_problem(const PlanProblem& pb, const PlanLayout& l) {
  try {
    check_layout(pb, l);
  } catch (const Error& e) {
    return error_reason(e.what());
  }
  return "";
}

// TP, SP, PP, DP (what is left), micro-batch, recompute, the optimizer's
// sharding and the precision, each checked as it is answered; then the whole
// layout with train's checks (asked again from TP on when it fails).
PlanLayout ask_layout_by_hand(Prompter& p, const PlanProblem& pb) {
  const ModelConfig& m = pb.model;
  for (;;) {
    PlanLayout l;
    l.tp = p.ask_int("tensor-model-parallel-size", "Tensor-parallel size (TP)", 1, [&](int64_t tp) {
      if (pb.world % tp != 0)
        return "the world size " + std::to_string(pb.world) + " is not divisible by TP " +
               std::to_string(tp);
      if (m.num_attention_heads % tp != 0)
        return "the " + std::to_string(m.num_attention_heads) +
               " attention heads are not divisible by TP " + std::to_string(tp);
      if (m.query_groups() % tp != 0)
        return "the " + std::to_string(m.query_groups()) +
               " query groups are not divisible by TP " + std::to_string(tp);
      return std::string();
    });
    l.sequence_parallel = l.tp > 1 && p.ask_yes_no("sequence-parallel",
                                                   "Sequence parallelism over the TP ranks", true);
    l.pp = p.ask_int(
        "pipeline-model-parallel-size", "Pipeline-parallel size (PP)", 1, [&](int64_t pp) {
          if ((pb.world / l.tp) % pp != 0)
            return "the " + std::to_string(pb.world / l.tp) +
                   " ranks left after TP are not divisible by PP " + std::to_string(pp);
          if (m.num_layers % pp != 0)
            return "the " + std::to_string(m.num_layers) + " layers are not divisible by PP " +
                   std::to_string(pp);
          return std::string();
        });
    l.dp = pb.world / (l.tp * l.pp);
    p.say("Data-parallel size (DP) = " + std::to_string(pb.world) +
          " ranks / (TP x PP) = " + std::to_string(l.dp));
    if (m.moe())
      l.ep =
          p.ask_int("expert-model-parallel-size", "Expert-parallel size (EP)", 1, [&](int64_t ep) {
            if (m.num_experts % ep != 0 || (l.tp * l.dp) % ep != 0)
              return "EP " + std::to_string(ep) + " must divide the " +
                     std::to_string(m.num_experts) + " experts and TP x DP " +
                     std::to_string(l.tp * l.dp);
            return std::string();
          });
    l.micro_batch_size =
        p.ask_int("micro-batch-size", "Micro-batch size (sequences)", 1, [&](int64_t mbs) {
          if (pb.global_batch_size % (mbs * l.dp) != 0)
            return "the global batch " + std::to_string(pb.global_batch_size) +
                   " is not divisible by micro-batch " + std::to_string(mbs) + " x DP " +
                   std::to_string(l.dp);
          return std::string();
        });
    Question rec{"recompute",
                 "Recompute (selective: attention, always on here; full: every "
                 "layer's forward again in backward)",
                 "selective",
                 {"selective", "full"},
                 {}};
    l.recompute = p.ask(rec);
    Question opt{"distributed-optimizer",
                 "Distributed optimizer (shard over DP: ZeRO-1 the optimizer state, ZeRO-2 and "
                 "the gradients, ZeRO-3 and the weights)",
                 "no",
                 {"no", "ZeRO-1", "ZeRO-2", "ZeRO-3"},
                 {}};
    const std::string zero = p.ask(opt);
    l.distributed_optimizer = zero != "no";
    l.sharding = zero == "ZeRO-2" ? "optim_grads" : zero == "ZeRO-3" ? "optim_grads_params" : "";
    Question prec{"precision", "Precision", "bf16", {"bf16", "fp32"}, {}};
    l.bf16 = p.ask(prec) == "bf16";
    const std::string why = layout_problem(pb, l);
    if (why.empty()) return l;
    MT_CHECK(p.mode() == Prompter::Mode::kAsk, "the layout ", l.name(), " cannot run: ", why);
    p.say("  invalid layout: " + why + "; asked again from TP");
  }
}

// The fastest layouts that fit (or, when none fits, the nearest) to choose
// from, or "hand".
PlanResult ask_layout(Prompter& p, const PlanProblem& pb, const PlanCluster& c) {
  const std::vector<PlanResult> all = evaluate_layouts(pb, enumerate_layouts(pb, {}), c);
  const bool any_fits = !all.empty() && all[0].fits;
  p.say(std::to_string(all.size()) + " layouts of " + std::to_string(pb.world) + " ranks; " +
        (any_fits ? "the fastest that fit in " + gb(c.device.memory_bytes) + " per process:"
                  : "none fits in " + gb(c.device.memory_bytes) + " per process (" +
                        misfit_reason(all[0], c) + "); the nearest:"));
  Question q{"layout", "Layout (a number, or hand to give the sizes yourself)", "1", {}, {}};
  for (size_t i = 0; i < all.size() && i < kOffered && all[i].fits == any_fits; ++i) {
    q.choices.push_back(all[i].layout.name());
    char note[160];
    std::snprintf(note, sizeof note, "step %.3f s, %.0f tokens/s, %s on the most loaded rank",
                  all[i].time.total(), all[i].tokens_per_s, gb(all[i].most_loaded_bytes()).c_str());
    q.notes.push_back(note);
  }
  q.choices.push_back("hand");
  q.notes.push_back("TP, SP, PP, DP, recompute, optimizer and precision one by one");
  const std::string a = p.ask(q);
  if (a != "hand")
    for (const PlanResult& r : all)
      if (r.layout.name() == a) return r;
  const PlanLayout l = ask_layout_by_hand(p, pb);
  PlanResult r = evaluate_layouts(pb, {l}, c).at(0);
  p.say(r.fits ? "it fits: " + gb(r.most_loaded_bytes()) + " on the most loaded rank"
               : "note: it does not fit: " + misfit_reason(r, c));
  return r;
}

}  // namespace

int run_config(const megatron::ConfigOptions& a, std::istream& in, std::ostream& out) {
  MT_CHECK(!(a.yes && !a.answers.empty()),
           "--yes and --answers are both given; fix: one of "
           "them (--answers: a key left out takes its default)");
  OutputGuard paths;
  paths.reads_file("--answers", a.answers);
  paths.writes_file("--output", a.output);
  paths.check();
  const Prompter::Mode mode = a.yes                ? Prompter::Mode::kDefaults
                              : !a.answers.empty() ? Prompter::Mode::kAnswers
                                                   : Prompter::Mode::kAsk;
  std::map<std::string, std::string> answers;
  if (!a.answers.empty()) {
    answers = read_answers_file(a.answers);
    const std::vector<std::string>& keys = config_answer_keys();
    for (const auto& [key, value] : answers)
      MT_CHECK(std::find(keys.begin(), keys.end(), key) != keys.end(), "--answers ", a.answers,
               ": '", key, "' is no question's key; fix: one of ", config_answer_key_list());
  }
  Prompter p(in, out, mode, answers, a.answers);
  if (std::filesystem::exists(a.output) && !a.force) {
    MT_CHECK(mode == Prompter::Mode::kAsk, "--output ", a.output,
             " exists and is kept; fix: "
             "--force to replace it, or another --output");
    MT_CHECK(p.ask_yes_no("overwrite", a.output + " exists; replace it", false), a.output,
             " exists and is kept; fix: another --output FILE");
  }
  DeviceProfile profile;
  const ConfigCluster cluster = ask_cluster(p, &profile);
  PlanProblem pb;
  pb.world = plan_world_size(cluster.machines, cluster.processes_per_machine);
  std::string model_name;
  pb.model = ask_model(p, &model_name);
  pb.global_batch_size = ask_global_batch(p, pb);
  PlanCluster c;
  c.nodes = cluster.machines;
  c.devices_per_node = cluster.processes_per_machine;
  c.device = profile;
  const PlanResult chosen = ask_layout(p, pb, c);
  for (const std::string& key : p.unused_answers())
    p.say("note: --answers key '" + key + "' was not asked with these answers (ignored)");
  if (cluster.device.size() > 5 && cluster.device.rfind(".json") == cluster.device.size() - 5) {
    OutputGuard device;
    device.reads_file("--device", cluster.device);
    device.writes_file("--output", a.output);
    device.check();
  }
  // Written beside and renamed in: a failed write leaves no half file.
  atomic_write_text(a.output, config_toml(model_name, pb, chosen, cluster, a.output));
  p.say("wrote " + a.output + "\n  check it:  megatron plan --config " + a.output);
  return 0;
}

void add_config_flags(CLI::App& app, megatron::ConfigOptions* a) {
  app.add_option("--output,-o", a->output,
                 "the TOML file to write (default megatron_config.toml); an existing one is "
                 "replaced only when you say so, or with --force")
      ->type_name("FILE");
  app.add_flag("--yes,-y", a->yes, "take every default without asking (scripts)");
  app.add_option("--answers", a->answers,
                 "answers from FILE: `key = value` lines (# comments); a key left out takes its "
                 "default, a bad answer is an error naming its line")
      ->type_name("FILE");
  app.add_flag("--force", a->force, "replace --output if it exists");
  app.footer("Questions, in order, with their --answers keys:\n" + config_answer_help() +
             "A line `wrote FILE` ends a run; Ctrl-D (end of input) before the end writes "
             "nothing and exits 1.\nSee the README's `megatron config` section.");
}

}  // namespace mt
