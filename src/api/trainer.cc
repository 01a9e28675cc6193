// megatron::Trainer (include/megatron/trainer.h): the train command of the
// binary (cli/train_cmd.cc) parsed from a flag list instead of argv, with the
// caller's callbacks as the loop's hooks (train/trainer.h).
#include "megatron/trainer.h"

#include <algorithm>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/unknown_flag.h"
#include "comm/mpi_env.h"
#include "core/error.h"

namespace megatron {

struct Trainer::Impl {
  CLI::App app{"megatron.cpp as a library: megatron train"};
  mt::TrainHooks hooks;
  std::function<void(const StepLog&)> on_step;
  std::function<void(const EvalLog&)> on_eval;
  mt::Command command;
};

namespace {

// The flags as main.cc parses a command line: --config files expanded, CLI11
// given them last-first; a refusal as one line naming the flag.
void parse(CLI::App& app, CLI::App& train, const std::vector<std::string>& flags) {
  std::vector<std::string> words = {"megatron", "train"};
  words.insert(words.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  std::vector<std::string> args;
  try {
    args = mt::expand_config_args(int(argv.size()), argv.data(), app);
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
  } catch (const mt::Error& e) {
    throw FlagError(e.what());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0)  // --help: the usage, as `megatron train --help` prints it
      throw FlagError(train.help());
    std::vector<std::string> unknown = train.remaining();
    const auto flag = std::find_if(args.begin(), args.end(), [&](const std::string& a) {
      return a.rfind("--", 0) == 0 && std::find(unknown.begin(), unknown.end(), a) != unknown.end();
    });
    if (flag != args.end()) throw FlagError(mt::unknown_flag_message(*flag, train));
    throw FlagError(std::string(e.what()) + "; see `megatron train --help`");
  }
}

}  // namespace

Trainer::Trainer(const std::vector<std::string>& flags) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.app.require_subcommand(1);
  CLI::App* train = s.app.add_subcommand("train", "train a GPT model");
  // The hooks read the callbacks when called, so on_step may come after the parse.
  s.hooks.on_step = [&s](const mt::StepReport& r) {
    if (s.on_step) s.on_step(StepLog{r.iteration, r.loss, r.grad_norm, r.lr, r.world_rank});
  };
  s.hooks.on_eval = [&s](const mt::EvalReport& r) {
    if (s.on_eval) s.on_eval(EvalLog{r.iteration, r.loss, r.test, r.world_rank});
  };
  s.command = mt::add_train_command(*train, s.hooks);
  parse(s.app, *train, flags);
}

Trainer::~Trainer() = default;

void Trainer::on_step(std::function<void(const StepLog&)> callback) {
  impl_->on_step = std::move(callback);
}

void Trainer::on_eval(std::function<void(const EvalLog&)> callback) {
  impl_->on_eval = std::move(callback);
}

int Trainer::run() {
  try {
    return impl_->command();
  } catch (const mt::Error& e) {
    mt::abort_job(e.what());
  } catch (const std::exception& e) {
    mt::abort_job(std::string("unexpected error: ") + e.what());
  }
}

}  // namespace megatron
