#include "args/resume_options.h"

#include "core/error.h"

namespace mt {

namespace {

std::string words(const nlohmann::json& v) {
  std::string out;
  for (const nlohmann::json& x : v) {
    if (!out.empty()) out += ' ';  // (a temporary "" or " " + dump() trips GCC 12's -Wrestrict)
    out += x.dump();
  }
  return out;
}

}  // namespace

nlohmann::json training_options_record(const TrainArgs& args) {
  nlohmann::json r = nlohmann::json::object();
  if (!args.rampup_batch_size.empty()) r["rampup_batch_size"] = args.rampup_batch_size;
  if (!args.step_batch_size_schedule.empty())
    r["step_batch_size_schedule"] = args.step_batch_size_schedule;
  // Recorded, not enforced (Megatron lets a resumed run change its masks).
  if (args.documents.reset_position_ids) r["reset_position_ids"] = true;
  if (args.documents.reset_attention_mask) r["reset_attention_mask"] = true;
  if (args.documents.eod_mask_loss) r["eod_mask_loss"] = true;
  if (args.calculate_per_token_loss) r["calculate_per_token_loss"] = true;
  return r;
}

void check_training_options_on_resume(const nlohmann::json& saved_args, const TrainArgs& args,
                                      const std::string& load_dir) {
  const nlohmann::json saved = saved_args.value("training", nlohmann::json::object());
  const nlohmann::json mine = training_options_record(args);
  for (const char* key : {"rampup_batch_size", "step_batch_size_schedule"}) {
    const nlohmann::json a = saved.value(key, nlohmann::json()), b = mine.value(key, nlohmann::json());
    if (a == b) continue;
    std::string flag = "--";  // (appended: GCC 12's false -Wrestrict on "--" + key)
    flag += key;
    for (char& c : flag) c = c == '_' ? '-' : c;
    MT_FAIL("--load ", load_dir, " was trained ",
            a.is_null() ? "without " + flag : "with " + flag + " " + words(a), ", this run ",
            b.is_null() ? "without it" : "with " + words(b), ": resuming would change what each "
            "iteration computes; fix: resume ", a.is_null() ? "without " + flag :
            "with " + flag + " " + words(a), " (or --finetune to start a new run from its "
            "weights)");
  }
}

}  // namespace mt
