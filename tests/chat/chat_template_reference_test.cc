// The chat-template renderer against an independent reference: the
// templates that Qwen3, Llama 3 and Gemma 3 ship in tokenizer_config.json
// (fetched by scripts/fetch_hf_tokenizers.sh into data/hf, or $MT_HF_DIR),
// rendered over the conversations of fixtures/conversations.json, and the
// small templates of fixtures/constructs.json (one construct each), must give
// exactly what @huggingface/jinja gives, run live under node by
// render_reference.mjs over the same inputs. Where the reference fails (a
// raise_exception, a bad value), the renderer must fail too, with the
// template's own message for raise_exception. strftime_now's clock is frozen
// in both. Without node or the npm packages the tests fail, naming the script
// (scripts/fetch_hf_tokenizers.sh, which CTest's tokenizer_files fixture runs).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "temp_dir.h"

namespace mt::chat {
namespace chat_template_reference_test {

using Json = nlohmann::ordered_json;
constexpr int64_t kNow = 1721995200;  // 2024-07-26 12:00:00 UTC

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string hf_dir() {
  const char* env = std::getenv("MT_HF_DIR");
  return env != nullptr ? std::string(env) : std::string(MT_SOURCE_DIR) + "/data/hf";
}

// Why the reference cannot run here ("" when it can).
std::string reference_missing() {
  if (std::system("node --version > /dev/null 2>&1") != 0)
    return "node not found (apt-get install nodejs npm), then run scripts/fetch_hf_tokenizers.sh";
  if (!std::filesystem::exists(hf_dir() + "/node_modules/@huggingface/jinja/package.json"))
    return hf_dir() + "/node_modules/@huggingface/jinja not found; run scripts/fetch_hf_tokenizers.sh (needs npm)";
  return "";
}

#define REQUIRE_REFERENCE()                                   \
  if (const std::string why = reference_missing(); !why.empty()) \
  GTEST_FAIL() << "chat template reference: " << why

struct Case {
  std::string name;
  std::string config;  // tokenizer_config.json text ("" for a construct case)
  Json input;          // {template, messages, add_generation_prompt, bos_token, eos_token, extra}
};

struct Outcome {
  bool ok = false;
  std::string text, error;
  bool raised = false;
};

// The reference's outcome of every case, in order.
std::vector<Outcome> reference(const std::vector<Case>& cases) {
  test::TempDir dir;
  Json inputs = Json::array();
  for (const Case& c : cases) inputs.push_back(c.input);
  std::ofstream(dir.file("cases.json")) << inputs.dump();
  const std::string cmd = "TZ=UTC MT_CHAT_NOW_EPOCH_S=" + std::to_string(kNow) + " node " +
                          std::string(MT_SOURCE_DIR) + "/tests/chat/render_reference.mjs " + hf_dir() +
                          "/node_modules " + dir.file("cases.json") + " > " + dir.file("out.json");
  std::vector<Outcome> out;
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "the reference failed: " << cmd;
    return out;
  }
  for (const Json& r : Json::parse(read_file(dir.file("out.json")))) {
    Outcome o;
    o.ok = r.at("ok").get<bool>();
    if (o.ok) o.text = r.at("text").get<std::string>();
    else o.error = r.at("error").get<std::string>();
    out.push_back(o);
  }
  return out;
}

Outcome ours(const Case& c) {
  Outcome o;
  try {
    const ChatTemplate t = c.config.empty()
                               ? ChatTemplate(c.input.at("template").get<std::string>(),
                                              c.input.at("bos_token").get<std::string>(),
                                              c.input.at("eos_token").get<std::string>())
                               : ChatTemplate::from_tokenizer_config(c.config);
    RenderOptions opt;
    opt.add_generation_prompt = c.input.at("add_generation_prompt").get<bool>();
    opt.extra = c.input.at("extra");
    opt.now_epoch_s = kNow;
    o.text = t.render(c.input.at("messages"), opt);
    o.ok = true;
  } catch (const TemplateError& e) {
    o.error = e.raised ? e.template_message : e.what();
    o.raised = e.raised;
  }
  return o;
}

// The one place we refuse what the reference renders: `'text' + list` (a
// TypeError in Python's Jinja, so in transformers).
bool is_list_concatenation(const std::string& error) {
  return error.find("cannot apply '+' to a string and a list") != std::string::npos ||
         error.find("cannot apply '+' to a list and a string") != std::string::npos;
}

// Compares every case; returns how many rendered (not errors) in both.
size_t compare_all(const std::vector<Case>& cases) {
  const std::vector<Outcome> ref = reference(cases);
  EXPECT_EQ(ref.size(), cases.size());
  if (ref.size() != cases.size()) return 0;
  size_t rendered = 0, divergences = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Outcome mine = ours(cases[k]);
    const Outcome& js = ref[k];
    SCOPED_TRACE(cases[k].name);
    if (js.ok && !mine.ok && is_list_concatenation(mine.error)) {
      ++divergences;  // Python's TypeError; the reference pastes JavaScript's Array.toString()
    } else if (js.ok) {
      EXPECT_TRUE(mine.ok) << "the reference renders, ours fails: " << mine.error;
      EXPECT_EQ(mine.text, js.text) << "ours:\n" << Json(mine.text).dump() << "\nreference:\n" << Json(js.text).dump();
      rendered += mine.ok && mine.text == js.text;
    } else {
      EXPECT_FALSE(mine.ok) << "the reference fails (" << js.error << "), ours renders:\n" << mine.text;
      // A template's raise_exception carries its message through both.
      if (mine.raised) {
        EXPECT_EQ(mine.error, js.error);
      }
    }
  }
  if (divergences > 0) std::printf("[ %zu cases refused where the reference concatenates a list to a string ]\n", divergences);
  return rendered;
}

// One case per conversation of fixtures/conversations.json over `tmpl`.
std::vector<Case> conversation_cases(const std::string& label, const std::string& config, const Json& tmpl,
                                     const std::string& bos, const std::string& eos) {
  std::vector<Case> cases;
  for (const Json& conv : Json::parse(read_file(std::string(MT_SOURCE_DIR) + "/tests/chat/fixtures/conversations.json"))) {
    // flatten_text_parts: the parts joined to one string first (what a server
    // does for templates that want string content), for both renderers.
    const bool flatten = conv.value("flatten_text_parts", false);
    Json in = {{"template", tmpl},
               {"messages", flatten ? flatten_text_parts(conv.at("messages")) : conv.at("messages")},
               {"add_generation_prompt", conv.at("add_generation_prompt")},
               {"bos_token", bos},
               {"eos_token", eos},
               {"extra", conv.value("extra", Json::object())}};
    cases.push_back({label + "/" + conv.at("name").get<std::string>(), config, in});
  }
  return cases;
}

// The templates of tokenizer_config.json files that the npm packages ship.
class ShippedTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedTemplate, RendersEveryConversationAsTheReference) {
  REQUIRE_REFERENCE();
  const std::string model = GetParam();
  const std::string path = hf_dir() + "/" + model + "/tokenizer_config.json";
  if (!std::filesystem::exists(path)) GTEST_FAIL() << path << " not found; run scripts/fetch_hf_tokenizers.sh";
  const std::string config = read_file(path);
  const Json cfg = Json::parse(config);
  auto token = [&](const char* key) {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::string();
    return cfg[key].is_string() ? cfg[key].get<std::string>() : cfg[key].at("content").get<std::string>();
  };
  const std::vector<Case> cases =
      conversation_cases(model, config, cfg.at("chat_template"), token("bos_token"), token("eos_token"));
  ASSERT_GE(cases.size(), 17u);
  const size_t rendered = compare_all(cases);
  // Most conversations render (the rest are errors in both, e.g. Gemma's
  // alternation check or list content where a template wants a string).
  EXPECT_GE(rendered, 13u);
  std::printf("[ %s: %zu conversations, %zu rendered equal to @huggingface/jinja ]\n", model.c_str(), cases.size(),
              rendered);
}

INSTANTIATE_TEST_SUITE_P(Models, ShippedTemplate, ::testing::Values("qwen3", "llama3", "gemma3"));

// Templates in the form of Llama 3.2's (strftime_now, tools in the first user
// message, messages[1:], tool calls) and Mistral's (alternation checked with
// raise_exception, [INST]), written here from their documented prompt formats
// since no npm package ships those tokenizer_config.json files.
class WrittenTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(WrittenTemplate, RendersEveryConversationAsTheReference) {
  REQUIRE_REFERENCE();
  const std::string name = GetParam();
  const std::string tmpl = read_file(std::string(MT_SOURCE_DIR) + "/tests/chat/fixtures/" + name + ".jinja");
  ASSERT_FALSE(tmpl.empty());
  const bool llama = name.rfind("llama", 0) == 0;
  const std::vector<Case> cases = conversation_cases(name, "", tmpl, llama ? "<|begin_of_text|>" : "<s>",
                                                     llama ? "<|eot_id|>" : "</s>");
  const size_t rendered = compare_all(cases);
  EXPECT_GE(rendered, 8u);
  std::printf("[ %s: %zu conversations, %zu rendered equal to @huggingface/jinja ]\n", name.c_str(), cases.size(),
              rendered);
}

INSTANTIATE_TEST_SUITE_P(Formats, WrittenTemplate, ::testing::Values("llama32_style", "mistral_style"));

TEST(ShippedTemplate, GemmaRefusesRolesThatDoNotAlternateWithItsMessage) {
  REQUIRE_REFERENCE();
  const std::string path = hf_dir() + "/gemma3/tokenizer_config.json";
  if (!std::filesystem::exists(path)) GTEST_FAIL() << path << " not found; run scripts/fetch_hf_tokenizers.sh";
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(read_file(path));
  try {
    t.render(Json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"));
    FAIL() << "rendered";
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised);
    EXPECT_EQ(e.template_message, "Conversation roles must alternate user/assistant/user/assistant/...");
    EXPECT_GT(e.line, 1);
  }
}

TEST(Constructs, EachRendersAsTheReference) {
  REQUIRE_REFERENCE();
  std::vector<Case> cases;
  for (const Json& c : Json::parse(read_file(std::string(MT_SOURCE_DIR) + "/tests/chat/fixtures/constructs.json"))) {
    Json in = {{"template", c.at("template")},
               {"messages", Json::array()},
               {"add_generation_prompt", true},
               {"bos_token", "<s>"},
               {"eos_token", "</s>"},
               {"extra", c.value("vars", Json::object())}};
    cases.push_back({c.at("name").get<std::string>(), "", in});
  }
  ASSERT_GE(cases.size(), 30u);
  EXPECT_GE(compare_all(cases), 28u);
}

}  // namespace chat_template_reference_test
}  // namespace mt::chat
