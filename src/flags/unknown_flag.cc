#include "flags/unknown_flag.h"

#include <algorithm>
#include <vector>

namespace mt {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Levenshtein distance (flags are short).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Every long flag of the command, its option groups included.
void long_flags(const CLI::App& app, std::vector<std::string>* out) {
  for (const CLI::Option* o : app.get_options())
    for (const std::string& n : o->get_lnames()) out->push_back("--" + n);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name().empty()) long_flags(*sub, out);  // option groups are unnamed
}

}  // namespace

std::string unknown_flag_message(const std::string& flag, const CLI::App& command) {
  const std::string name = flag.substr(0, flag.find('='));
  const std::string cmd = "megatron " + command.get_name();
  if (starts_with(name, "--fp8") || starts_with(name, "--fp4") ||
      starts_with(name, "--first-last-layers-bf16"))
    return name + ": fp8 and fp4 number formats are not built (no such matmul on the CPUs this "
                  "runs on); fix: train in --bf16 (or fp32) and leave out the --fp8-* / --fp4-* "
                  "flags";
  if (starts_with(name, "--wandb"))
    return name + ": Weights & Biases logging is not built; fix: log with --tensorboard-dir DIR "
                  "(Megatron's TensorBoard tags) and --log-json FILE, and leave out the --wandb-* "
                  "flags";
  if (starts_with(name, "--use-torch-fsdp2") || starts_with(name, "--torch-fsdp2"))
    return name + ": PyTorch FSDP2 is not built; fix: --use-megatron-fsdp "
                  "--data-parallel-sharding-strategy optim_grads_params (Megatron-FSDP, ZeRO-3)";
  if (starts_with(name, "--window-attn-skip-freq"))
    return name + ": full-attention layers between sliding-window ones are not built (every "
                  "layer uses --window-size); fix: leave out --window-attn-skip-freq";
  if (name == "--decrease-batch-size-if-needed")
    return name + ": rounding the global batch down is not built (each batch, ramp-up included, "
                  "must divide by micro-batch x DP); fix: a --global-batch-size (and "
                  "--rampup-batch-size) that divides";
  std::vector<std::string> flags;
  long_flags(command, &flags);
  std::string best;
  size_t best_d = std::string::npos;
  for (const std::string& f : flags) {
    const size_t d = edit_distance(name, f);
    if (d < best_d) {
      best_d = d;
      best = f;
    }
  }
  std::string s = "unknown flag " + name;
  if (!best.empty() && best_d <= std::max<size_t>(3, name.size() / 3))
    s += "; the nearest flag of `" + cmd + "` is " + best;
  return s + "; see `" + cmd + " --help`";
}

}  // namespace mt
