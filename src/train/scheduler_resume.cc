#include "train/scheduler_resume.h"

#include <sstream>

#include "core/error.h"

namespace mt {

namespace {

const char* decay_style_name(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::kConstant: return "constant";
    case LrDecayStyle::kLinear: return "linear";
    case LrDecayStyle::kCosine: return "cosine";
    case LrDecayStyle::kWsd: return "WSD";
  }
  return "?";
}

// One value of the record: its key, the flags that set it, and where it lives
// in a ParamScheduler (numbers; the two styles are handled beside).
struct Field {
  const char* key;
  const char* flags;
  double* value;
  double scale;  // record = value x scale (iterations → samples)
};

std::string text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

nlohmann::json scheduler_record(const TrainArgs& a, const ParamScheduler& s) {
  const double g = double(a.global_batch_size);
  nlohmann::json r = {{"optimizer", a.optimizer_args.optimizer},
                      {"sgd_momentum", a.optim.sgd_momentum},
                      {"max_lr", s.lr.max_lr},
                      {"min_lr", s.lr.min_lr},
                      {"lr_warmup_steps", s.lr.warmup_iters * g},
                      {"lr_decay_steps", s.lr.decay_iters * g},
                      {"lr_decay_style", decay_style_name(s.lr.style)},
                      {"start_wd", s.wd.start_wd},
                      {"end_wd", s.wd.end_wd},
                      {"wd_incr_steps", s.wd.incr_iters * g},
                      {"wd_incr_style", wd_incr_style_name(s.wd.style)},
                      {"decoupled_lr", nullptr},
                      {"decoupled_min_lr", nullptr}};
  if (s.decoupled) {
    r["decoupled_lr"] = s.decoupled->max_lr;
    r["decoupled_min_lr"] = s.decoupled->min_lr;
  }
  return r;
}

ParamScheduler resume_param_scheduler(const TrainArgs& a, const nlohmann::json* saved_args,
                                      RunState& state, std::string& note) {
  ParamScheduler s = param_scheduler_from_flags(a);
  if (saved_args == nullptr) return s;
  const OptimizerArgs& o = a.optimizer_args;
  // The optimizer state must be this optimizer's (checkpoints before the
  // record are Adam's).
  const nlohmann::json* rec = saved_args->contains("opt_param_scheduler")
                                  ? &saved_args->at("opt_param_scheduler")
                                  : nullptr;
  const std::string saved_opt = rec ? rec->value("optimizer", "adam") : "adam";
  MT_CHECK(saved_opt == o.optimizer, "--optimizer ", o.optimizer, ", but the checkpoint's "
           "optimizer state is ", saved_opt, "'s; fix: --optimizer ", saved_opt, ", or "
           "--no-load-optim to start the ", o.optimizer, " state afresh");
  if (rec == nullptr) {
    note = "the checkpoint records no LR/weight-decay schedule (saved before it was recorded): "
           "this command line's is used";
    return s;
  }
  if (o.override_opt_param_scheduler) {
    state.skipped_iterations = 0;  // Megatron: num_steps = consumed samples
  }
  const nlohmann::json mine = scheduler_record(a, s);
  const double g = double(a.global_batch_size);
  // The decoupled group: present or not, then its ends.
  double dec_max = s.decoupled ? s.decoupled->max_lr : -1;
  double dec_min = s.decoupled ? s.decoupled->min_lr : -1;
  const Field fields[] = {{"max_lr", "--lr", &s.lr.max_lr, 1},
                          {"min_lr", "--min-lr", &s.lr.min_lr, 1},
                          {"lr_warmup_steps", "--lr-warmup-iters/-samples/-fraction",
                           &s.lr.warmup_iters, g},
                          {"lr_decay_steps", "--lr-decay-iters/-samples", &s.lr.decay_iters, g},
                          {"start_wd", "--start-weight-decay (or --weight-decay)", &s.wd.start_wd,
                           1},
                          {"end_wd", "--end-weight-decay (or --weight-decay)", &s.wd.end_wd, 1},
                          {"wd_incr_steps", "--train-iters/--train-samples", &s.wd.incr_iters, g},
                          {"decoupled_lr", "--decoupled-lr", &dec_max, 1},
                          {"decoupled_min_lr", "--decoupled-min-lr (or --min-lr)", &dec_min, 1}};
  std::ostringstream diff;
  auto differs = [&](const char* key, const char* flags) {
    const nlohmann::json &cp = rec->at(key), &cl = mine.at(key);
    if (cp == cl) return false;
    diff << (diff.tellp() > 0 ? ", " : "") << key << " " << text(cp) << " (checkpoint) vs "
         << text(cl) << " (command line, " << flags << ")";
    return true;
  };
  for (const Field& f : fields)
    if (differs(f.key, f.flags) && o.use_checkpoint_opt_param_scheduler &&
        !rec->at(f.key).is_null())
      *f.value = rec->at(f.key).get<double>() / f.scale;
  if (differs("lr_decay_style", "--lr-decay-style") && o.use_checkpoint_opt_param_scheduler)
    s.lr.style = parse_lr_decay_style(rec->at("lr_decay_style"));
  if (differs("wd_incr_style", "--weight-decay-incr-style") && o.use_checkpoint_opt_param_scheduler)
    s.wd.style = parse_wd_incr_style(rec->at("wd_incr_style"));
  if (diff.tellp() == 0) return s;
  if (o.use_checkpoint_opt_param_scheduler) {
    // The decoupled group as the checkpoint had it (or none).
    if (rec->at("decoupled_lr").is_null()) {
      s.decoupled.reset();
    } else {
      s.decoupled = s.lr;
      s.decoupled->max_lr = dec_max;
      s.decoupled->min_lr = dec_min;
    }
    s.lr.validate();
    s.wd.validate();
  }
  // Neither flag: Megatron-LM asserts; here the run goes on with this command
  // line's values (what extending --train-iters needs) and says so, naming
  // both flags.
  const bool neither = !o.use_checkpoint_opt_param_scheduler && !o.override_opt_param_scheduler;
  note = std::string(o.use_checkpoint_opt_param_scheduler
                         ? "--use-checkpoint-opt_param-scheduler: the checkpoint's schedule "
                           "values are used: "
                     : o.override_opt_param_scheduler
                         ? "--override-opt_param-scheduler: this command line's schedule values "
                           "are used: "
                         : "this command line's schedule values are used: ") +
         diff.str() +
         (neither ? " (Megatron-LM stops here unless told: --override-opt_param-scheduler "
                    "to use the command line's, --use-checkpoint-opt_param-scheduler to keep "
                    "the checkpoint's)"
                  : "");
  return s;
}

}  // namespace mt
