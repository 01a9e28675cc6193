// The commands that are clients of the public API: the table main.cc
// dispatches, and how each reports flags refused.
#include <cstdio>

#include "commands.h"
#include "megatron/flags.h"

namespace mt {

int run_words(const Say& say, const std::function<int()>& body) {
  try {
    return body();
  } catch (const megatron::FlagHelp& help) {
    std::fputs(help.what(), stdout);
    return 0;
  } catch (const megatron::FlagError& e) {
    say(e.what());
    return 2;
  }
}

const std::vector<WordsCommandEntry> kWordsCommands = {
    {"train", "train a GPT model (launch with mpirun for many ranks)", run_train_command},
    {"generate", "generate text from a checkpoint", run_generate_command},
    {"score", "the loss of a checkpoint on a text or JSONL file, per document (no training)",
     run_score_command},
    {"serve", "Megatron's text generation API and an OpenAI-compatible one over a checkpoint",
     run_serve_command},
    {"preprocess", "tokenize text into a Megatron .bin/.idx dataset", run_preprocess_command},
    {"convert", "convert Hugging Face gpt2/llama folders <-> megatron.cpp checkpoints",
     run_convert_command},
    {"plan", "memory and step time of every TP/PP/DP layout of a model on a cluster (no ranks)",
     run_plan_command},
    {"config",
     "a few questions (cluster, model, layout from plan), then a TOML file for train --config "
     "and plan --config",
     run_config_command},
};

}  // namespace mt
