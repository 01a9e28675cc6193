// `megatron convert` for MistralForCausalLM (Llama's layout with head_dim and
// sliding_window W -> --window-size W-1,0), judged by a committed fixture
// (tests/fixtures/mistral_tiny, written by tests/reference/mistral_reference.py
// from hf_models.py's Hugging Face semantics; no Python at test time):
//  - the folder (head_dim 16 apart from hidden / heads, window 5) imports at TP2
//    and at TP2 x PP2, and greedy decoding of 24 tokens past the window (the
//    ring KV cache) gives the fixture's tokens and log-probabilities (1e-4);
//  - exported back, the folder holds the original's tensors byte for byte and
//    its config keys (model_type mistral, sliding_window 5);
//  - sliding_window null imports as no window (and exports as llama); absent,
//    MistralConfig's default 4096; Qwen2 with use_sliding_window on every layer
//    (max_window_layers 0) imports the window, on some layers only is refused.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "convert_test_util.h"

namespace mt::test {
namespace mistral_convert_test {

namespace fs = std::filesystem;

const std::string kFixture = std::string(MT_SOURCE_DIR) + "/tests/fixtures/mistral_tiny";

// A copy of the fixture folder (tests may edit it).
std::string copy_fixture(const TempDir& dir) {
  const std::string hf = dir.file("hf");
  fs::create_directories(hf);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    fs::copy_file(kFixture + "/" + f, hf + "/" + f);
  return hf;
}

nlohmann::json import_model(const std::string& hf, const std::string& ckpt, int tp, int pp) {
  const RunResult c = run(convert(" --loader hf --saver megatron --load-dir " + hf + " --save-dir " +
                                  ckpt + " --target-tensor-parallel-size " + std::to_string(tp) +
                                  " --target-pipeline-parallel-size " + std::to_string(pp)));
  EXPECT_EQ(c.exit_code, 0) << c.output;
  if (c.exit_code != 0) return nullptr;
  return nlohmann::json::parse(read_text(ckpt + "/release/meta.json")).at("args").at("model");
}

TEST(MistralConvert, ImportsAtTp2AndTp2Pp2DecodesAsTheFixtureAndExportsBack) {
  TempDir dir;
  const std::string hf = copy_fixture(dir);
  const nlohmann::json want = nlohmann::json::parse(read_text(kFixture + "/greedy.json"));
  for (const auto& [tag, pp] : {std::pair<std::string, int>{"tp2", 1}, {"tp2pp2", 2}}) {
    const std::string ckpt = dir.file("ckpt_" + tag);
    const nlohmann::json model = import_model(hf, ckpt, 2, pp);
    ASSERT_FALSE(model.is_null()) << tag;
    EXPECT_EQ(model.at("window_size"), "4,0") << tag;
    EXPECT_EQ(model.at("kv_channels"), 16) << tag;
    EXPECT_EQ(model.at("num_query_groups"), 2) << tag;
    const std::string json = dir.file(tag + "_gen.json");
    const RunResult g = run(megatron() + " generate --load " + ckpt + " --prompt '" +
                            want.at("prompt").get<std::string>() + "' --max-new-tokens " +
                            std::to_string(want.at("tokens").size()) +
                            " --temperature 0 --output-json " + json);
    ASSERT_EQ(g.exit_code, 0) << tag << "\n" << g.output;
    const nlohmann::json got = nlohmann::json::parse(read_text(json));
    EXPECT_EQ(got.at("prompt_tokens"), want.at("prompt_tokens")) << tag;
    ASSERT_EQ(got.at("tokens"), want.at("tokens")) << tag;
    double worst = 0;
    for (size_t i = 0; i < want.at("log_probs").size(); ++i)
      worst = std::max(worst, std::abs(got.at("log_probs")[i].get<double>() -
                                       want.at("log_probs")[i].get<double>()));
    EXPECT_LT(worst, 1e-4) << tag;
    std::printf("mistral %s: greedy log-probs within %.2e of the fixture\n", tag.c_str(), worst);
  }
  expect_exports_back(dir.file("ckpt_tp2pp2"), hf, dir.file("back"),
                      {llama_config_keys_and({"head_dim", "sliding_window"}), {},
                       {"tokenizer.model"}});
}

TEST(MistralConvert, SlidingWindowNullAbsentAndQwenWindows) {
  TempDir dir;
  const std::string hf = copy_fixture(dir);
  edit_config(hf, "sliding_window", nullptr);  // no window: Llama's model
  const nlohmann::json none = import_model(hf, dir.file("none"), 1, 1);
  ASSERT_FALSE(none.is_null());
  EXPECT_EQ(none.at("window_size"), "");
  const RunResult e = run(convert(" --loader megatron --saver hf --load-dir " + dir.file("none") +
                                  " --save-dir " + dir.file("none_hf")));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir.file("none_hf") + "/config.json")).at("model_type"),
            "llama");
  nlohmann::json c = nlohmann::json::parse(read_text(hf + "/config.json"));
  c.erase("sliding_window");  // MistralConfig's default
  write_text(hf + "/config.json", c.dump(2));
  EXPECT_EQ(import_model(hf, dir.file("absent"), 1, 1).at("window_size"), "4095,0");
  // The same weights as a Qwen2 folder (its q/k/v biases zero) with a window on
  // every layer, and on the second layer only.
  c.erase("head_dim");
  c["model_type"] = "qwen2";
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["use_sliding_window"] = true;
  c["sliding_window"] = 5;
  c["head_dim"] = 16;
  c["max_window_layers"] = 0;
  write_text(hf + "/config.json", c.dump(2));
  edit_tensors(hf, "t.update({k.replace('weight', 'bias'): torch.zeros(v.shape[0]) for k, v in "
                   "list(t.items()) if k.endswith(('q_proj.weight', 'k_proj.weight', "
                   "'v_proj.weight'))})");
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(import_model(hf, dir.file("qwen_all"), 1, 1).at("window_size"), "4,0");
  edit_config(hf, "max_window_layers", 1);
  const RunResult some = run(convert(" --loader hf --saver megatron --load-dir " + hf +
                                     " --save-dir " + dir.file("qwen_some")));
  EXPECT_NE(some.exit_code, 0);
  EXPECT_NE(some.output.find("config.json: max_window_layers = 1 is not supported: the sliding "
                             "window is on 1 of 2 layers"),
            std::string::npos)
      << some.output;
  EXPECT_FALSE(exists(dir.file("qwen_some")));
}

}  // namespace mistral_convert_test
}  // namespace mt::test
