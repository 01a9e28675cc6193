// The model and batch questions of `megatron config`, and the one list of
// every question's --answers key (its --help and the check of a file's keys).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "wizard/config_prompt.h"
#include "plan/plan_layout.h"

namespace mt {

// A named size (wizard/named_models.h) or "custom" with its sizes asked; then
// the sequence length. `name` is set to the answer.
ModelConfig ask_model(Prompter& p, std::string* name);

// Sequences per iteration; an answer that leaves no layout of pb.world ranks
// (pb.model set) is asked again with the first reason.
int64_t ask_global_batch(Prompter& p, const PlanProblem& pb);

// Every --answers key, in the order asked.
const std::vector<std::string>& config_answer_keys();
// "device, machines, ..." for messages.
std::string config_answer_key_list();
// One line per key with what it asks, for --help.
std::string config_answer_help();

}  // namespace mt
