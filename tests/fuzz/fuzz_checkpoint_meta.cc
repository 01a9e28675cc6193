// libFuzzer target: the checkpoint meta.json validator
// (checkpoint/checkpoint_dir.h, parse_checkpoint_meta). Input: the file's text; the
// directory says iteration 10 (the seeds do too). Contract: a bad file throws
// mt::Error; an accepted one can be read the way load_checkpoint, the trainer
// and generate then read it (the same .at() / get<T>() calls) without any
// other exception, and the values they narrow to int keep their value.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_util.h"
#include "checkpoint/checkpoint_dir.h"

using mt::fuzz::wrong_answer;

namespace {

constexpr int64_t kDirIteration = 10;

void check_accepted(const nlohmann::json& meta) {
  if (meta.at("iteration").get<int64_t>() != kDirIteration) wrong_answer("iteration mismatch");
  meta.at("consumed_samples").get<int64_t>();
  for (const char* k : {"tensor_model_parallel_size", "pipeline_model_parallel_size"}) {
    // load_checkpoint reads these with get<int>().
    const nlohmann::json& v = meta.at(k);
    if (v.get<int64_t>() < 1 || v.get<int64_t>() != int64_t(v.get<int>()))
      wrong_answer(std::string(k) + " = " + v.dump() + " does not survive get<int>()");
  }
  const nlohmann::json& model = meta.at("args").at("model");
  for (const char* k : {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                        "seq_length", "max_position_embeddings", "vocab_size",
                        "padded_vocab_size", "make_vocab_size_divisible_by"})
    if (model.at(k).get<int64_t>() < 1) wrong_answer(std::string("accepted ") + k + " < 1");
  for (const char* k : {"init_method_std", "hidden_dropout", "attention_dropout",
                        "layernorm_epsilon"})
    model.at(k).get<double>();
  const auto stages = meta.at("args").at("layer_stage").get<std::vector<int>>();
  if (int64_t(stages.size()) != model.at("num_layers").get<int64_t>())
    wrong_answer("layer_stage length differs from num_layers");
  for (int s : stages)
    if (s < 0 || s >= meta.at("pipeline_model_parallel_size").get<int>())
      wrong_answer("layer_stage names a stage outside the pipeline");
  meta.at("args").at("tokenizer").at("type").get<std::string>();
  meta.value("skipped_iterations", int64_t(0));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json meta;
  try {
    meta = mt::parse_checkpoint_meta(text, "iter_0000010/meta.json", kDirIteration);
  } catch (const mt::Error&) {  // a refused file: the expected outcome
    return 0;
  }
  try {
    check_accepted(meta);
  } catch (const nlohmann::json::exception& e) {
    wrong_answer(std::string("accepted meta.json fails when read: ") + e.what());
  }
  return 0;
}
