#include "wizard/config_toml.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "args/args_list.h"
#include "flags/plan_flags.h"
#include "flags/train_flags.h"
#include "core/error.h"

namespace mt {

namespace {

// Train flags that belong to a run, not to the configuration (each run names
// its data, tokenizer and length); train_args_of fills them with placeholders.
const std::set<std::string> kPerRun = {"--train-iters", "--data-path", "--tokenizer-type"};

// Written even at train's default: the sizes a reader looks for first.
const std::set<std::string> kAlways = {
    "--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
    "--seq-length", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--micro-batch-size", "--global-batch-size"};

// A value as TOML: numbers and true bare, anything else a quoted string.
std::string toml_value(const std::string& v) {
  if (v == "true") return v;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (!v.empty() && end == v.c_str() + v.size() && std::isfinite(x)) {
    // 1e+06 as 1000000 (a whole number in float's shortest form).
    if (v.find("e+") != std::string::npos && x == std::floor(x) && std::fabs(x) < 1e15)
      return std::to_string(static_cast<long long>(x));
    return v;
  }
  std::string q = "\"";
  for (char c : v) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

bool has_flag(const CLI::App& app, const std::string& flag) {
  return app.get_option_no_throw(flag) != nullptr;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

std::string config_toml(const std::string& model_name, const PlanProblem& pb,
                        const PlanResult& r, const ConfigCluster& cluster,
                        const std::string& path) {
  // The two readers of the file: which flags each takes.
  CLI::App train_app, plan_app;
  add_train_flags(train_app);
  add_plan_flags(plan_app);
  std::set<std::string> model_flags;
  ModelConfig probe;
  for_each_model_field(probe, [&](const char*, const char* flag, const char*, auto&) {
    const std::string f(flag);
    if (!f.empty()) model_flags.insert(f.substr(0, f.find(',')));
  });
  // Every train flag whose value differs from train's default, and the sizes (kAlways).
  std::map<std::string, std::string> defaults;
  for (const auto& [flag, value] : argument_list(TrainArgs{})) defaults[flag] = value;
  std::string model, layout, train_only;
  for (const auto& [flag, value] : argument_list(train_args_of(pb, r.layout))) {
    const bool always = kAlways.count(flag) > 0 && value != "0";  // 0: "derive it"
    if (kPerRun.count(flag) > 0 || (defaults[flag] == value && !always)) continue;
    MT_CHECK(value != "false", "internal: ", flag, " is on by default and off here; a config "
             "file cannot switch it off");
    MT_CHECK(has_flag(train_app, flag), "internal: ", flag, " is not a flag of megatron train");
    const std::string line = flag.substr(2) + " = " + toml_value(value) + "\n";
    if (!has_flag(plan_app, flag))
      train_only += line;
    else if (model_flags.count(flag) > 0)
      model += line;
    else
      layout += line;
  }
  const int64_t world = cluster.machines * cluster.processes_per_machine;
  const PlanLayout& l = r.layout;
  std::string out;
  out += "# Written by `megatron config`. Keys are flags of megatron train and megatron plan:\n";
  out += "# the top level is read by both, [train] by train only, [plan] by plan only.\n";
  out += "#\n# Launch (" + std::to_string(world) + " ranks: " +
         std::to_string(cluster.machines) + " machine(s) x " +
         std::to_string(cluster.processes_per_machine) + " process(es), " +
         std::to_string(cluster.threads_per_process) + " thread(s) each):\n";
  out += "#   mpirun -n " + std::to_string(world) +
         (cluster.machines > 1 ? " --hostfile HOSTS" : "") + " --bind-to none -x OMP_NUM_THREADS=" +
         std::to_string(cluster.threads_per_process) + " megatron train --config " + path +
         " \\\n#       --data-path PREFIX --tokenizer-type TYPE --tokenizer-model DIR"
         " --train-iters N --lr LR\n";
  out += "#   (a smoke test: --mock-data --tokenizer-type NullTokenizer --train-iters 2)\n";
  out += "# Compare the other layouts: megatron plan --config " + path + "\n\n";
  out += "# model: " + model_name + "\n" + model + "\n";
  out += "# layout: " + l.name() + ", DP " + std::to_string(l.dp) + " (plan: step " +
         fmt("%.3f", r.time.total()) + " s, " + fmt("%.0f", r.tokens_per_s) + " tokens/s, " +
         fmt("%.2f", r.most_loaded_bytes() / 1e9) + " GB on the most loaded rank, of " +
         fmt("%.2f", cluster.memory_gb) + " GB per process" + (r.fits ? "" : ": does NOT fit") +
         ")\n" + layout;
  if (!train_only.empty()) out += "\n[train]\n" + train_only;
  out += "\n[plan]\n";
  out += "device = " + toml_value(cluster.device) + "\n";
  out += "num-nodes = " + std::to_string(cluster.machines) + "\n";
  out += "devices-per-node = " + std::to_string(cluster.processes_per_machine) + "\n";
  out += "device-memory-gb = " + toml_value(fmt("%g", cluster.memory_gb)) + "\n";
  return out;
}

}  // namespace mt
