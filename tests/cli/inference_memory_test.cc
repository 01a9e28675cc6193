// `generate` and `score` size their key/value cache by the request, not by the
// checkpoint's max_position_embeddings, and check it against the host's memory
// before allocating (issue 27, item 6); `score` refuses an --input with no
// document and an --output-json that is its --input (item 8).
#include <sys/stat.h>

#include "bad_input_util.h"

namespace mt::test {
namespace inference_memory_test {

// 2^40 positions: a cache of the whole context would be 281 TB (bad_alloc
// before the fix). RoPE has no position table, so training costs nothing more.
constexpr const char* kHugeContext = "1099511627776";

class InferenceMemory : public BadInputFixture {
 protected:
  void SetUp() override {
    BadInputFixture::SetUp();
    const RunResult t = run(megatron() + train(std::string(" --seq-length 16 --position-embedding-type"
                                                           " rope --max-position-embeddings ") +
                                               kHugeContext + " --save " + dir.file("ckpt")));
    ASSERT_EQ(t.exit_code, 0) << t.output;
  }
  // `megatron <args>` under a 1 GB address-space limit (not under ASan, which
  // reserves terabytes of shadow memory).
  RunResult run_bounded(const std::string& args) const {
#ifdef __SANITIZE_ADDRESS__
    return run(megatron() + args);
#else
    return run("ulimit -v 1000000; " + megatron() + args);
#endif
  }
  std::string score(const std::string& input, const std::string& extra = "") const {
    return " score --load " + dir.file("ckpt") + " --input " + input + extra;
  }
};

TEST_F(InferenceMemory, GenerateSizesTheCacheByPromptAndNewTokens) {
  const RunResult r = run_bounded(" generate --load " + dir.file("ckpt") +
                                  " --prompt 'The ' --max-new-tokens 8 --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\nThe "), std::string::npos) << "the prompt, continued:\n" << r.output;
  // 4 prompt tokens (char tokenizer) + 8 new ones; the bytes a token take.
  EXPECT_NE(r.output.find(std::string("generate: key/value cache of 12 positions (the model's "
                                      "context: ") + kHugeContext + "; "),
            std::string::npos)
      << r.output;
}

TEST_F(InferenceMemory, GenerateBeyondTheHostsMemoryIsRefusedNamingTheLever) {
  // 10^12 new tokens: ~550 TB of cache, refused before anything is allocated.
  expect_fails({"huge --max-new-tokens",
                " generate --load {dir}ckpt --prompt 'The ' --max-new-tokens 1000000000000",
                "but only "});
  const RunResult r = run(megatron() + " generate --load " + dir.file("ckpt") +
                          " --prompt 'The ' --max-new-tokens 1000000000000");
  EXPECT_NE(r.output.find("generate needs "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" GB (predicted"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fix: lower --max-new-tokens (1000000000000) or shorten --prompt"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("key/value cache of"), std::string::npos) << "allocated:\n" << r.output;
}

TEST_F(InferenceMemory, ScoreSizesTheCacheByTheLongestDocument) {
  write_text(dir.file("docs.txt"), "The cat sees the river.\n\nA dog.\n");
  const RunResult r = run_bounded(score(dir.file("docs.txt")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The longest document has 23 characters: 22 predictions.
  EXPECT_NE(r.output.find("score: key/value cache of 22 positions"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"total\":{\"documents\":2"), std::string::npos) << r.output;
}

TEST_F(InferenceMemory, ScoreWithNoDocumentIsAnErrorNamingTheInput) {
  ::mkdir(dir.file("folder").c_str(), 0755);
  write_text(dir.file("empty.txt"), "");
  write_text(dir.file("blank.txt"), "\n\n  \n\n\n");
  write_text(dir.file("blank.jsonl"), "\n \n\n");
  const std::string s = " score --load {dir}ckpt --input {dir}";
  const BadInputCase cases[] = {
      {"a directory", s + "folder", "folder is a directory"},
      {"an empty file", s + "empty.txt", "empty.txt is empty"},
      {"blank lines", s + "blank.txt", "blank.txt has only blank lines"},
      {"blank JSONL lines", s + "blank.jsonl", "blank.jsonl has only blank lines"},
  };
  for (const BadInputCase& c : cases) expect_fails(c);
}

TEST_F(InferenceMemory, ScoreOutputJsonThatIsTheInputIsRefusedAndTheInputKept) {
  const std::string text = "The cat sees the river.\n\nA dog likes the garden.\n";
  write_text(dir.file("docs.txt"), text);
  ASSERT_EQ(::symlink(dir.file("docs.txt").c_str(), dir.file("link.json").c_str()), 0);
  const std::string input = " --input {dir}docs.txt";
  const BadInputCase cases[] = {
      {"the same path", " score --load {dir}ckpt" + input + " --output-json {dir}docs.txt",
       "is the file that --input"},
      {"another spelling", " score --load {dir}ckpt" + input + " --output-json {dir}./docs.txt",
       "is the file that --input"},
      {"a link to it", " score --load {dir}ckpt" + input + " --output-json {dir}link.json",
       "is the file that --input"},
  };
  for (const BadInputCase& c : cases) {
    expect_fails(c);
    EXPECT_EQ(read_text(dir.file("docs.txt")), text) << c.name;
  }
}

TEST(InferenceMemoryHelp, SaysWhatTheCacheHolds) {
  for (const char* cmd : {" generate --help", " score --help"}) {
    const RunResult r = run(megatron() + cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("key/value cache holds"), std::string::npos) << cmd << r.output;
  }
}

}  // namespace inference_memory_test
}  // namespace mt::test
