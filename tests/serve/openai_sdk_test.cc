// `megatron serve` through the official OpenAI client (npm `openai` under
// node, tests/serve/openai_client.mjs): completions streaming and not, the
// same text as `megatron generate --temperature 0`; logprobs, echo and stop;
// chat completions on a checkpoint with a chat template, and a 400 naming
// the template on one without; the model list and the health check.
#include "serve/serve_test_util.h"

namespace mt::test::serve {
namespace openai_sdk_test {

class ServeOpenAi : public ServerSuite {
 protected:
  static void SetUpTestSuite() { s_ = new SuiteServer(); }
};

const std::string kPrompt = "The cat sees";
constexpr int kTokens = 24;

TEST_F(ServeOpenAi, CompletionsStreamingAndNotEqualGenerate) {
  REQUIRE_OPENAI_SDK();
  const Json base = {{"model", "tiny-char"}, {"prompt", kPrompt}, {"max_tokens", kTokens}, {"temperature", 0}};
  Json streamed = base;
  streamed["stream_options"] = {{"include_usage", true}};
  const Json out = openai_client(s_->port(), Json::array({{{"call", "completions"}, {"params", base}},
                                                          {{"call", "completions_stream"}, {"params", streamed}}}),
                                 dir);
  ASSERT_EQ(out.size(), 2u) << out.dump();
  const Json& c = out[0];
  ASSERT_FALSE(c.contains("thrown")) << c.dump();
  EXPECT_EQ(c.at("object"), "text_completion");
  EXPECT_EQ(c.at("model"), "tiny-char");
  EXPECT_TRUE(c.at("id").is_string() && !c.at("id").get<std::string>().empty()) << c.dump();
  EXPECT_TRUE(c.at("created").is_number_integer()) << c.dump();
  ASSERT_EQ(c.at("choices").size(), 1u) << c.dump();
  const Json& choice = c.at("choices")[0];
  EXPECT_EQ(choice.at("index"), 0);
  EXPECT_EQ(choice.at("finish_reason"), "length");
  EXPECT_TRUE(choice.at("logprobs").is_null()) << c.dump();
  const std::string text = choice.at("text");
  EXPECT_EQ(text.size(), size_t(kTokens)) << "one character per token: " << text;
  EXPECT_EQ(text, generate_continuation(s_->ckpt, kPrompt, kTokens, dir));
  // The grammar was learnt: the continuation is not one character repeated.
  EXPECT_NE(text.find_first_not_of(text[0]), std::string::npos) << text;
  EXPECT_EQ(c.at("usage").at("prompt_tokens"), int(kPrompt.size()));
  EXPECT_EQ(c.at("usage").at("completion_tokens"), kTokens);
  EXPECT_EQ(c.at("usage").at("total_tokens"), int(kPrompt.size()) + kTokens);

  const Json& st = out[1];
  ASSERT_FALSE(st.contains("thrown")) << st.dump();
  EXPECT_EQ(st.at("text"), text);
  EXPECT_EQ(st.at("finish_reason"), "length");
  const Json& chunks = st.at("chunks");
  ASSERT_GE(chunks.size(), 3u) << "a token per chunk or so, then the usage: " << st.dump();
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].at("object"), "text_completion") << chunks[i].dump();
    EXPECT_EQ(chunks[i].at("id"), chunks[0].at("id")) << "one id per stream";
    EXPECT_EQ(chunks[i].at("choices").size(), 1u) << chunks[i].dump();
  }
  // stream_options.include_usage: a last chunk with the usage and no choices.
  const Json& last = chunks.back();
  EXPECT_TRUE(last.at("choices").empty()) << last.dump();
  EXPECT_EQ(last.at("usage"), c.at("usage")) << last.dump();
}

TEST_F(ServeOpenAi, LogprobsEchoAndStop) {
  REQUIRE_OPENAI_SDK();
  const Json base = {{"model", "tiny-char"}, {"prompt", kPrompt}, {"max_tokens", 16}, {"temperature", 0}};
  Json lp = base, echo = base;
  lp["logprobs"] = 3;
  echo["echo"] = true;
  const Json out = openai_client(s_->port(), Json::array({{{"call", "completions"}, {"params", base}},
                                                          {{"call", "completions"}, {"params", lp}},
                                                          {{"call", "completions"}, {"params", echo}}}),
                                 dir);
  ASSERT_EQ(out.size(), 3u) << out.dump();
  for (const Json& o : out) ASSERT_FALSE(o.contains("thrown")) << o.dump();
  const std::string text = out[0].at("choices")[0].at("text");
  ASSERT_EQ(text.size(), 16u) << text;

  // logprobs: 3: each generated token, its log-probability, the 3 most likely
  // alternatives (greedy: the chosen token is the most likely), its offset.
  const Json& l = out[1].at("choices")[0];
  EXPECT_EQ(l.at("text"), text);
  const Json& lps = l.at("logprobs");
  ASSERT_EQ(lps.at("tokens").size(), 16u) << lps.dump();
  ASSERT_EQ(lps.at("token_logprobs").size(), 16u) << lps.dump();
  ASSERT_EQ(lps.at("top_logprobs").size(), 16u) << lps.dump();
  ASSERT_EQ(lps.at("text_offset").size(), 16u) << lps.dump();
  std::string joined;
  for (size_t i = 0; i < 16; ++i) {
    const std::string tok = lps.at("tokens")[i];
    const double p = lps.at("token_logprobs")[i];
    EXPECT_LE(p, 0.0);
    const Json& top = lps.at("top_logprobs")[i];
    EXPECT_EQ(top.size(), 3u) << top.dump();
    double best = -1e30;
    for (const auto& [t, v] : top.items()) best = std::max(best, v.get<double>());
    ASSERT_TRUE(top.contains(tok)) << i << ": " << top.dump();
    EXPECT_NEAR(top.at(tok).get<double>(), p, 1e-5) << i;
    EXPECT_NEAR(p, best, 1e-5) << "greedy picks the most likely: " << i << " " << top.dump();
    EXPECT_EQ(lps.at("text_offset")[i].get<size_t>(), joined.size()) << i;
    joined += tok;
  }
  EXPECT_EQ(joined, text);

  // echo: the prompt, then the same continuation.
  EXPECT_EQ(out[2].at("choices")[0].at("text"), kPrompt + text);

  // stop: the text before the stop string's first place in the
  // continuation, finish_reason "stop"; a list of stops takes the earliest.
  size_t k = 4;
  while (k + 2 <= text.size() && text.find(text.substr(k, 2)) != k) ++k;
  ASSERT_LE(k + 2, text.size()) << "no 2-character string first seen after position 4 in " << text;
  Json stop1 = base, stop2 = base;
  stop1["stop"] = text.substr(k, 2);
  stop2["stop"] = Json::array({"@@@", text.substr(k, 2), text.substr(k + 1, 1) + "#"});
  // Streamed, no piece of the stop string leaks out before it is recognised.
  const Json st = openai_client(s_->port(), Json::array({{{"call", "completions"}, {"params", stop1}},
                                                         {{"call", "completions"}, {"params", stop2}},
                                                         {{"call", "completions_stream"}, {"params", stop1}},
                                                         {{"call", "completions_stream"}, {"params", stop2}}}),
                                dir);
  ASSERT_EQ(st.size(), 4u) << st.dump();
  for (size_t i = 0; i < st.size(); ++i) {
    const Json& o = st[i];
    ASSERT_FALSE(o.contains("thrown")) << o.dump();
    const bool streamed = i >= 2;
    EXPECT_EQ(streamed ? o.at("text") : o.at("choices")[0].at("text"), text.substr(0, k))
        << (streamed ? "streamed: " : "") << "stop " << text.substr(k, 2) << " in " << text;
    EXPECT_EQ(streamed ? o.at("finish_reason") : o.at("choices")[0].at("finish_reason"), "stop") << i;
  }
}

// OpenAI's default max_tokens is 16.
TEST_F(ServeOpenAi, MaxTokensDefaultsTo16) {
  const Reply r = post(s_->port(), "/v1/completions", {{"prompt", kPrompt}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().at("usage").at("completion_tokens"), 16) << r.body;
}

TEST_F(ServeOpenAi, ModelsHealthAndNAboveOneRefused) {
  REQUIRE_OPENAI_SDK();
  Json two = {{"model", "tiny-char"}, {"prompt", kPrompt}, {"max_tokens", 4}, {"n", 2}};
  const Json out = openai_client(s_->port(), Json::array({{{"call", "models"}}, {{"call", "completions"}, {"params", two}}}),
                                 dir);
  ASSERT_EQ(out.size(), 2u) << out.dump();
  const Json& data = out[0].at("data");
  ASSERT_EQ(data.size(), 1u) << out[0].dump();
  EXPECT_EQ(data[0].at("id"), "tiny-char");
  EXPECT_EQ(data[0].at("object"), "model");
  EXPECT_EQ(data[0].at("owned_by"), "megatron.cpp");
  EXPECT_EQ(out[1].value("thrown", false), true) << out[1].dump();
  EXPECT_EQ(out[1].at("status"), 400) << out[1].dump();
  EXPECT_EQ(out[1].at("error").at("param"), "n") << out[1].dump();

  for (const char* path : {"/v1/health", "/health"}) {
    const Reply r = request(s_->port(), "GET", path);
    EXPECT_EQ(r.status, 200) << path << " " << r.body << r.error;
    EXPECT_EQ(r.json().value("status", ""), "ok") << path << " " << r.body;
  }
  const Reply m = request(s_->port(), "GET", "/v1/models");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.json().at("object"), "list") << m.body;
}

// The character tokenizer has no chat template: 400 naming what is missing.
TEST_F(ServeOpenAi, ChatWithoutATemplateIsRefusedNamingIt) {
  const Reply r = post(s_->port(), "/v1/chat/completions",
                       {{"model", "tiny-char"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}});
  EXPECT_EQ(r.status, 400) << r.body;
  const Json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_NE(j.at("error").at("message").get<std::string>().find("template"), std::string::npos) << r.body;
  const Reply st = post(s_->port(), "/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}, {"stream", true}});
  EXPECT_EQ(st.status, 400) << "streamed too: " << st.body;
  // and the server goes on serving
  EXPECT_EQ(greedy_completion(s_->port(), kPrompt, 4).size(), 4u);
}

// A checkpoint with Qwen3's tokenizer.json and tokenizer_config.json: its
// chat template renders the messages; streaming and not give the same text.
class ServeChat : public ServerSuite {
 protected:
  static void SetUpTestSuite() {
    const std::string ckpt = chat_checkpoint();
    if (!ckpt.empty()) s_ = new SuiteServer("", ckpt);
  }
};

TEST_F(ServeChat, ChatCompletionsStreamingAndNotAgree) {
  REQUIRE_OPENAI_SDK();
  const Json messages = {{{"role", "system"}, {"content", "You are terse."}},
                         {{"role", "user"}, {"content", "The cat sees"}}};
  const Json base = {{"model", "tiny-char"}, {"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
  Json streamed = base, completion_tokens = base;
  streamed["stream_options"] = {{"include_usage", true}};
  completion_tokens.erase("max_tokens");
  completion_tokens["max_completion_tokens"] = 8;
  const Json out = openai_client(s_->port(), Json::array({{{"call", "chat"}, {"params", base}},
                                                          {{"call", "chat_stream"}, {"params", streamed}},
                                                          {{"call", "chat"}, {"params", completion_tokens}}}),
                                 dir);
  ASSERT_EQ(out.size(), 3u) << out.dump();
  for (const Json& o : out) ASSERT_FALSE(o.contains("thrown")) << o.dump();
  const Json& c = out[0];
  EXPECT_EQ(c.at("object"), "chat.completion");
  ASSERT_EQ(c.at("choices").size(), 1u);
  const Json& msg = c.at("choices")[0].at("message");
  EXPECT_EQ(msg.at("role"), "assistant");
  const std::string content = msg.at("content");
  const std::string finish = c.at("choices")[0].at("finish_reason");
  EXPECT_TRUE(finish == "length" || finish == "stop") << finish;
  const Json& u = c.at("usage");
  EXPECT_GT(u.at("prompt_tokens").get<int>(), 8) << "the template's tokens and the messages: " << u.dump();
  EXPECT_LE(u.at("completion_tokens").get<int>(), 8);
  if (finish == "length") {
    EXPECT_EQ(u.at("completion_tokens"), 8);
  }
  EXPECT_EQ(u.at("total_tokens"), u.at("prompt_tokens").get<int>() + u.at("completion_tokens").get<int>());

  const Json& st = out[1];
  EXPECT_EQ(st.at("text"), content);
  EXPECT_EQ(st.at("role"), "assistant");
  EXPECT_EQ(st.at("finish_reason"), finish);
  EXPECT_EQ(st.at("usage"), u);
  for (const Json& chunk : st.at("chunks")) EXPECT_EQ(chunk.at("object"), "chat.completion.chunk") << chunk.dump();
  EXPECT_TRUE(st.at("chunks").back().at("choices").empty()) << "include_usage's last chunk";

  EXPECT_EQ(out[2].at("choices")[0].at("message").at("content"), content) << "max_completion_tokens as max_tokens";
}

// A chat completion is the completion of the messages as the checkpoint's
// chat template renders them: rendered here by @huggingface/jinja (the
// reference of tests/chat), then sent to /v1/completions, the same prompt
// tokens and the same greedy text.
TEST_F(ServeChat, ChatIsTheCompletionOfTheRenderedTemplate) {
  REQUIRE_OPENAI_SDK();
  const Json cfg = Json::parse(read_text(hf_dir() + "/qwen3/tokenizer_config.json"));
  const Json messages = {{{"role", "system"}, {"content", "You are terse."}},
                         {{"role", "user"}, {"content", "The cat sees"}},
                         {{"role", "assistant"}, {"content", "a dog."}},
                         {{"role", "user"}, {"content", "And then?"}}};
  write_text(dir.file("cases.json"), Json::array({{{"template", cfg.at("chat_template")},
                                                   {"messages", messages},
                                                   {"add_generation_prompt", true},
                                                   {"bos_token", ""},
                                                   {"eos_token", cfg.at("eos_token")}}})
                                         .dump());
  const RunResult ref = run_stdout("node " + std::string(MT_SOURCE_DIR) + "/tests/chat/render_reference.mjs " +
                                       hf_dir() + "/node_modules " + dir.file("cases.json"),
                                   dir.file("render_stderr.txt"));
  ASSERT_EQ(ref.exit_code, 0) << read_text(dir.file("render_stderr.txt"));
  const Json rendered = Json::parse(ref.output, nullptr, false);
  ASSERT_TRUE(rendered.is_array() && rendered[0].value("ok", false)) << ref.output;
  const std::string prompt = rendered[0].at("text");

  const Reply chat = post(s_->port(), "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
  const Reply completion = post(s_->port(), "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  ASSERT_EQ(completion.status, 200) << completion.body;
  const Json c = chat.json(), p = completion.json();
  EXPECT_EQ(c.at("usage").at("prompt_tokens"), p.at("usage").at("prompt_tokens"))
      << "the rendered prompt:\n" << prompt;
  EXPECT_EQ(c.at("choices")[0].at("message").at("content"), p.at("choices")[0].at("text")) << prompt;
}

// Text beyond ASCII (Qwen3's byte-level BPE: a character may span tokens):
// echoed exactly, and the streamed pieces join to the whole answer.
TEST_F(ServeChat, UnicodeEchoesExactlyAndStreamsWhole) {
  const std::string prompt = "Café 日本語 — naïve 🙂";
  const Json base = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}};
  Json echo = base, streamed = base;
  echo["echo"] = true;
  streamed["stream"] = true;
  const Reply whole = post(s_->port(), "/v1/completions", base);
  const Reply echoed = post(s_->port(), "/v1/completions", echo);
  const Reply stream = post(s_->port(), "/v1/completions", streamed);
  ASSERT_EQ(whole.status, 200) << whole.body;
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  ASSERT_EQ(stream.status, 200) << stream.body;
  const std::string text = whole.json().at("choices")[0].at("text");
  EXPECT_EQ(echoed.json().at("choices")[0].at("text"), prompt + text);
  std::string joined;
  for (const std::string& e : sse_data(stream.body)) {
    if (e == "[DONE]") break;
    const Json chunk = Json::parse(e, nullptr, false);
    ASSERT_TRUE(chunk.is_object()) << "an event that is not JSON (split UTF-8?): " << e;
    if (!chunk.at("choices").empty()) joined += chunk.at("choices")[0].at("text").get<std::string>();
  }
  EXPECT_EQ(joined, text);
  const Reply api = request(s_->port(), "PUT", "/api",
                            Json{{"prompts", {prompt}}, {"tokens_to_generate", 4}, {"top_k", 1}}.dump());
  ASSERT_EQ(api.status, 200) << api.body;
  EXPECT_EQ(api.json().at("text")[0].get<std::string>().rfind(prompt, 0), 0u) << api.body;
}

}  // namespace openai_sdk_test
}  // namespace mt::test::serve
