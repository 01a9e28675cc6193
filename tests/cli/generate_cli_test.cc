// `megatron generate` on a prompt longer than the model's context conditions
// on the prompt's end (what the continuation follows), says so once, and its
// flags are range-checked before anything is loaded (issue 17); --output-json
// reports ids and log-probabilities (issue 11).
#include "bad_input_util.h"

namespace mt::test {
namespace generate_cli_test {

class GenerateCli : public BadInputFixture {
 protected:
  // stdout and stderr of `generate` apart: the text, and the notes.
  struct Output {
    int exit_code;
    std::string text, notes;
  };
  Output generate(const std::string& flags) const {
    const std::string err = dir.file("stderr.txt");
    const RunResult r = run_stdout(megatron() + " generate --load " + dir.file("ckpt") + flags, err);
    return {r.exit_code, r.output, read_text(err)};
  }
};

TEST_F(GenerateCli, PromptLongerThanTheContextConditionsOnItsEnd) {
  constexpr int kContext = 16;
  const RunResult t = run(megatron() + train(" --seq-length 16 --train-iters 60 --save " +
                                             dir.file("ckpt")));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string prompt = "The cat sees the river. A dog likes the garden. My friend finds the ca";
  const std::string tail = prompt.substr(prompt.size() - kContext);
  const std::string flags = " --temperature 0 --max-new-tokens 24";
  const Output whole = generate(" --prompt '" + prompt + "'" + flags);
  const Output end = generate(" --prompt '" + tail + "'" + flags);
  ASSERT_EQ(whole.exit_code, 0) << whole.text << whole.notes;
  ASSERT_EQ(end.exit_code, 0) << end.text << end.notes;
  ASSERT_EQ(whole.text.rfind(prompt, 0), 0u) << "the whole prompt is echoed:\n" << whole.text;
  ASSERT_EQ(end.text.rfind(tail, 0), 0u) << end.text;
  const std::string continuation = whole.text.substr(prompt.size());
  EXPECT_GT(continuation.size(), 1u) << whole.text;
  EXPECT_EQ(continuation, end.text.substr(tail.size()));
  EXPECT_NE(whole.notes.find("the prompt has " + std::to_string(prompt.size()) +
                             " tokens, more than the model's context of 16; conditioning on "
                             "its last 16"),
            std::string::npos)
      << whole.notes;
  EXPECT_EQ(end.notes.find("conditioning on"), std::string::npos) << end.notes;
  // --max-new-tokens 0 prints the prompt and nothing more.
  const Output none = generate(" --prompt '" + tail + "' --max-new-tokens 0");
  ASSERT_EQ(none.exit_code, 0) << none.notes;
  EXPECT_EQ(none.text, tail + "\n");
}

// --output-json: the ids the model conditioned on and generated, and each
// generated token's log-probability (temperature 1, real vocabulary only);
// greedy decoding picks the most likely token, so its log-probability is the
// largest, and sampling at temperature 1 from the same seed gives the same
// tokens with the same log-probabilities.
TEST_F(GenerateCli, OutputJsonHasTheIdsAndTheirLogProbabilities) {
  const RunResult t = run(megatron() + train(" --seq-length 16 --train-iters 40 --save " +
                                             dir.file("ckpt")));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string json = dir.file("gen.json");
  const Output g = generate(" --prompt 'The cat' --temperature 0 --max-new-tokens 10"
                            " --output-json " + json);
  ASSERT_EQ(g.exit_code, 0) << g.text << g.notes;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("prompt"), "The cat");
  EXPECT_EQ(j.at("prompt_tokens").size(), 7u);  // the char tokenizer: one id per character
  const auto tokens = j.at("tokens").get<std::vector<int>>();
  const auto lp = j.at("log_probs").get<std::vector<double>>();
  ASSERT_EQ(tokens.size(), 10u);
  ASSERT_EQ(lp.size(), tokens.size());
  const auto vocab = nlohmann::json::parse(read_text(dir.file("corpus_vocab.json")));
  for (size_t i = 0; i < lp.size(); ++i) {
    EXPECT_LE(lp[i], 0.0) << i;
    // The argmax of V choices has probability >= 1/V.
    EXPECT_GE(lp[i], -std::log(double(vocab.size()))) << i;
    EXPECT_LT(tokens[i], int(vocab.size())) << "a padding row was chosen";
  }
  EXPECT_EQ(g.text, "The cat" + j.at("text").get<std::string>() + "\n");
  // Sampled tokens are less likely than the greedy ones on average, and
  // their log-probabilities are reproducible.
  const Output s1 = generate(" --prompt 'The cat' --max-new-tokens 10 --seed 3 --output-json " +
                             dir.file("s1.json"));
  const Output s2 = generate(" --prompt 'The cat' --max-new-tokens 10 --seed 3 --output-json " +
                             dir.file("s2.json"));
  ASSERT_EQ(s1.exit_code, 0) << s1.notes;
  EXPECT_EQ(read_text(dir.file("s1.json")), read_text(dir.file("s2.json")));
}

TEST_F(GenerateCli, FlagsOutOfRangeNameTheirValue) {
  const std::string gen = " generate --load {dir}none --prompt hi";
  const BadInputCase cases[] = {
      {"negative new tokens", gen + " --max-new-tokens -5", "--max-new-tokens -5"},
      {"negative temperature", gen + " --temperature -1", "--temperature -1"},
      {"negative top-k", gen + " --top-k -2", "--top-k -2"},
      {"top-p above 1", gen + " --top-p 1.5", "--top-p 1.5"},
      {"negative top-p", gen + " --top-p -0.5", "--top-p -0.5"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

}  // namespace generate_cli_test
}  // namespace mt::test
