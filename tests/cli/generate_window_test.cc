// `megatron generate` past its context window: the window restarts on its
// last half each time it fills (issue 16); stderr says so exactly once, the
// --output-json marks it, and --help explains it.
#include <nlohmann/json.hpp>

#include "bad_input_util.h"

namespace mt::test {
namespace generate_window_test {

constexpr const char* kNotice = "generate: the context of 16 tokens is full; it restarts on its "
                                "last 8 tokens, and again each time it fills";

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class GenerateWindow : public BadInputFixture {
 protected:
  void SetUp() override {
    BadInputFixture::SetUp();
    const RunResult t =
        run(megatron() + train(" --seq-length 16 --train-iters 30 --save " + dir.file("ckpt")));
    ASSERT_EQ(t.exit_code, 0) << t.output;
  }
  // stderr of a greedy generation of `n` tokens from "The "; its JSON in *j.
  std::string generate(int n, nlohmann::json* j) const {
    const std::string err = dir.file("stderr.txt"), json = dir.file("out.json");
    const RunResult r = run_stdout(megatron() + " generate --load " + dir.file("ckpt") +
                                       " --prompt 'The ' --temperature 0 --max-new-tokens " +
                                       std::to_string(n) + " --output-json " + json,
                                   err);
    EXPECT_EQ(r.exit_code, 0) << r.output << read_text(err);
    *j = nlohmann::json::parse(read_text(json));
    return read_text(err);
  }
};

TEST_F(GenerateWindow, SaysOnceThatTheWindowRestartsOnItsLastHalf) {
  nlohmann::json j;
  const std::string notes = generate(60, &j);
  // 4 prompt tokens + >= 40 generated pass the 16-token window at least 4 times.
  ASSERT_GE(j.at("tokens").size(), 40u) << j.dump();
  EXPECT_EQ(count(notes, kNotice), 1) << notes;
  EXPECT_EQ(j.value("context_slid", false), true) << j.dump();
}

TEST_F(GenerateWindow, SilentWhileTheContextHasRoom) {
  nlohmann::json j;
  const std::string notes = generate(8, &j);  // 4 + 8 < 16
  EXPECT_EQ(count(notes, "context of 16 tokens is full"), 0) << notes;
  EXPECT_FALSE(j.contains("context_slid")) << j.dump();
}

TEST(GenerateHelp, ExplainsTheContextWindow) {
  const RunResult r = run(megatron() + " generate --help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("it restarts on its last half"), std::string::npos) << r.output;
}

}  // namespace generate_window_test
}  // namespace mt::test
