// megatron::Trainer (include/megatron/trainer.h): `megatron train`'s flags
// (flags/train_flags.h) parsed from a flag list, run as TrainingRun's pieces
// (train/trainer.h) over a TrainSession with the caller's callbacks as its
// hooks, over the caller's DataSource when given one. The binary's `train`
// (cli/train_cmd.cc) is a client of it.
#include "megatron/trainer.h"

#include <algorithm>
#include <utility>

#include "comm/mpi_env.h"
#include "core/error.h"
#include "data/sample_dataset.h"
#include "flags/command_words.h"
#include "flags/train_flags.h"
#include "train/train_session.h"
#include "train/trainer.h"

namespace megatron {

namespace {

// The program's DataSource as the loop's training split: sample i as the
// source serves it (asked once for its tokens and its labels).
class ProgramSamples final : public mt::SampleDataset {
 public:
  ProgramSamples(std::shared_ptr<const DataSource> source, int64_t seq_length)
      : source_(std::move(source)), s_(seq_length), sample_(size_t(seq_length + 1)) {}
  int64_t size() const override { return source_->size(); }
  int64_t seq_length() const override { return s_; }
  void read_sample(int64_t i, int64_t start, int64_t n, int32_t* out) const override {
    MT_CHECK(i >= 0 && i < size() && start >= 0 && start + n <= s_ + 1, "sample ", i, " [", start,
             ", ", start + n, ") outside the DataSource's ", size(), " samples of ", s_ + 1,
             " tokens (internal error)");
    if (i != held_) {
      source_->sample(i, s_, sample_.data());
      held_ = i;
    }
    std::copy(sample_.begin() + start, sample_.begin() + start + n, out);
  }
  std::string describe_sample(int64_t i) const override {
    return "sample " + std::to_string(i) + " of the program's megatron::DataSource";
  }

 private:
  std::shared_ptr<const DataSource> source_;
  int64_t s_;
  mutable std::vector<int32_t> sample_;  // (s + 1,): sample held_
  mutable int64_t held_ = -1;
};

// Ends the whole job with `what`, the run dropped first as unwinding out of
// the loop did: its resources let go as at a normal end (the --save folder's
// lock file removed, so that a refused resume leaves the folder as it was).
[[noreturn]] void fail(std::unique_ptr<mt::TrainingRun>& run, const std::string& what) {
  run.reset();
  mt::abort_job(what);
}

// `f()`, an error in it ending the whole job as the binary's do (misuse,
// std::logic_error, is the caller's).
template <class F>
auto guarded(std::unique_ptr<mt::TrainingRun>& run, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::logic_error&) {
    throw;
  } catch (const mt::Error& e) {
    fail(run, e.what());
  } catch (const std::exception& e) {
    fail(run, std::string("unexpected error: ") + e.what());
  }
}

}  // namespace

struct Trainer::Impl {
  CLI::App app{"megatron.cpp as a library: megatron train"};
  std::function<mt::TrainArgs()> args;  // after the parse
  std::function<void(const StepLog&)> on_step;
  std::function<void(const EvalLog&)> on_eval;
  std::shared_ptr<const DataSource> train_data;
  bool finished = false;  // run() returned: MPI may be gone
  // Declared before the run: it outlives it.
  std::unique_ptr<mt::TrainSession> session;
  std::unique_ptr<mt::TrainingRun> run;

  mt::TrainingRun& set_up(const char* call) {
    if (finished)
      throw std::logic_error(std::string("megatron::Trainer::") + call + " after run()");
    if (!run)
      throw std::logic_error(std::string("megatron::Trainer::") + call + " before setup()");
    return *run;
  }
};

Trainer::Trainer(const std::vector<std::string>& flags) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.app.require_subcommand(1);
  CLI::App* train = mt::add_train_subcommand(s.app);
  s.args = mt::add_train_flags(*train);
  mt::parse_command_words(s.app, *train, flags);
}

Trainer::~Trainer() = default;

void Trainer::on_step(std::function<void(const StepLog&)> callback) {
  impl_->on_step = std::move(callback);
}

void Trainer::on_eval(std::function<void(const EvalLog&)> callback) {
  impl_->on_eval = std::move(callback);
}

void Trainer::set_train_data(std::shared_ptr<const DataSource> source) {
  if (impl_->run || impl_->finished)
    throw std::logic_error("megatron::Trainer::set_train_data() after setup()");
  if (!source) throw std::logic_error("megatron::Trainer::set_train_data(): no source");
  impl_->train_data = std::move(source);
}

void Trainer::setup() {
  Impl& s = *impl_;
  if (s.run || s.finished) throw std::logic_error("megatron::Trainer::setup() twice");
  guarded(s.run, [&] {
    mt::TrainArgs args = s.args();
    std::shared_ptr<const mt::SampleDataset> samples;
    if (s.train_data) {
      args.program_train_data = true;
      samples = std::make_shared<ProgramSamples>(s.train_data, args.model.seq_length);
    }
    // The hooks read the callbacks when called, so on_step may come after setup().
    mt::TrainHooks hooks;
    hooks.on_step = [&s](const mt::StepReport& r) {
      if (s.on_step) s.on_step(StepLog{r.iteration, r.loss, r.grad_norm, r.lr, r.world_rank});
    };
    hooks.on_eval = [&s](const mt::EvalReport& r) {
      if (s.on_eval) s.on_eval(EvalLog{r.iteration, r.loss, r.test, r.world_rank});
    };
    s.session = std::make_unique<mt::TrainSession>(args);
    s.run = std::make_unique<mt::TrainingRun>(std::move(args), s.session->ps(), std::move(hooks),
                                              std::move(samples));
    s.run->setup();
  });
}

StepLog Trainer::step() {
  mt::TrainingRun& run = impl_->set_up("step()");
  if (run.args().skip_train)
    throw std::logic_error("megatron::Trainer::step() with --skip-train");
  if (run.iteration() >= run.args().train_iters)
    throw std::logic_error("megatron::Trainer::step() after --train-iters " +
                           std::to_string(run.args().train_iters) +
                           " (the learning-rate schedule ends there; raise --train-iters)");
  const mt::StepReport r = guarded(impl_->run, [&] { return run.step(); });
  return StepLog{r.iteration, r.loss, r.grad_norm, r.lr, r.world_rank};
}

EvalLog Trainer::evaluate() {
  mt::TrainingRun& run = impl_->set_up("evaluate()");
  if (!run.has_valid())
    throw std::logic_error("megatron::Trainer::evaluate(): the run has no validation split "
                           "(give --eval-interval and --eval-iters > 0, and a --split with a "
                           "validation weight or a --valid-data-path)");
  const mt::EvalReport r = guarded(impl_->run, [&] { return run.evaluate(); });
  return EvalLog{r.iteration, r.loss, r.test, r.world_rank};
}

void Trainer::save() {
  mt::TrainingRun& run = impl_->set_up("save()");
  if (run.args().save.empty())
    throw std::logic_error("megatron::Trainer::save() without --save DIR");
  guarded(impl_->run, [&] { run.save(); });
}

int64_t Trainer::iteration() const { return impl_->set_up("iteration()").iteration(); }

int64_t Trainer::train_iters() const {
  return impl_->set_up("train_iters()").args().train_iters;
}

int Trainer::run() {
  Impl& s = *impl_;
  if (s.finished) throw std::logic_error("megatron::Trainer::run() twice");
  if (!s.run) setup();
  return guarded(s.run, [&] {
    const int rc = s.run->train();
    s.run.reset();
    s.session->close();
    s.finished = true;
    return rc;
  });
}

}  // namespace megatron
