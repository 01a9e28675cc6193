// `megatron score`: per-document loss of a checkpoint on given text. Each
// token's log-probability equals the one `generate` reports for it in the
// same context; long documents are scored in windows; TP2 scores as one
// rank; a shuffled document scores worse than the text it was trained on.
#include <algorithm>
#include <random>

#include "cli_test_util.h"

namespace mt::test {
namespace score_cli_test {

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  return out;
}

class ScoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = synthetic_corpus(200);
    const std::string data = prepare_data(dir_, corpus_);
    const RunResult r = run(megatron() + " train" + data + tiny_model_flags() +
                            " --train-iters 150 --eval-interval 0 --log-interval 50 --save " +
                            dir_.file("ckpt"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  TempDir dir_;
  std::string corpus_;
};

TEST_F(ScoreCli, LogProbsEqualGeneratesAndTotalsAddUp) {
  const RunResult g = run(megatron() + " generate --load " + dir_.file("ckpt") +
                          " --prompt 'The cat' --max-new-tokens 20 --temperature 0.8 --seed 7"
                          " --output-json " + dir_.file("g.json"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const nlohmann::json gen = nlohmann::json::parse(read_text(dir_.file("g.json")));
  // prompt + continuation (7 + 20 characters, within the 32-token context),
  // then a document longer than three contexts.
  const std::string first = gen.at("prompt").get<std::string>() + gen.at("text").get<std::string>();
  const std::string second = corpus_.substr(0, corpus_.find("\n\n"));
  ASSERT_GT(second.size(), 100u);
  write_text(dir_.file("docs.jsonl"), nlohmann::json{{"text", first}}.dump() + "\n" +
                                          nlohmann::json{{"text", second}}.dump() + "\n");
  const RunResult s = run(megatron() + " score --load " + dir_.file("ckpt") + " --input " +
                          dir_.file("docs.jsonl") + " --log-probs --output-json " +
                          dir_.file("s.jsonl"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const std::vector<nlohmann::json> lines = json_lines(read_text(dir_.file("s.jsonl")));
  ASSERT_EQ(lines.size(), 3u);
  const auto& want = gen.at("log_probs");
  const auto& got = lines[0].at("log_probs");
  const size_t n = want.size();
  ASSERT_EQ(n, 20u);
  ASSERT_EQ(got.size(), first.size() - 1);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(lines[0].at("ids")[got.size() - n + 1 + i], gen.at("tokens")[i]);
    EXPECT_NEAR(got[got.size() - n + i].get<double>(), want[i].get<double>(), 1e-12) << i;
  }
  // The long document: every token after the first is predicted once.
  EXPECT_EQ(lines[1].at("tokens").get<int64_t>(), int64_t(second.size()) - 1);
  double sum = 0;
  int64_t tokens = 0;
  for (int d = 0; d < 2; ++d) {
    const double lp = lines[size_t(d)].at("sum_log_prob").get<double>();
    const int64_t t = lines[size_t(d)].at("tokens").get<int64_t>();
    EXPECT_NEAR(lines[size_t(d)].at("loss").get<double>(), -lp / double(t), 1e-12);
    sum += lp;
    tokens += t;
  }
  const nlohmann::json& total = lines[2].at("total");
  EXPECT_EQ(total.at("documents").get<int>(), 2);
  EXPECT_EQ(total.at("tokens").get<int64_t>(), tokens);
  EXPECT_NEAR(total.at("loss").get<double>(), -sum / double(tokens), 1e-12);
  EXPECT_NEAR(total.at("ppl").get<double>(), std::exp(-sum / double(tokens)), 1e-9);
}

TEST_F(ScoreCli, TensorParallelScoresAsOneRankAndTrainingTextBeatsShuffled) {
  std::string text = corpus_.substr(0, 2000);
  std::string shuffled = text;
  std::mt19937 gen(3);
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  for (char& c : shuffled)
    if (c == '\n') c = ' ';  // one document
  write_text(dir_.file("docs.txt"), text + "\n\n" + shuffled + "\n");
  // Into files: under mpirun, stderr lines can land inside stdout's.
  const RunResult one = run(megatron() + " score --load " + dir_.file("ckpt") + " --input " +
                            dir_.file("docs.txt") + " --output-json " + dir_.file("one.jsonl"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const RunResult two = run(mpirun(2) + " score --tensor-model-parallel-size 2 --load " +
                            dir_.file("ckpt") + " --input " + dir_.file("docs.txt") +
                            " --output-json " + dir_.file("two.jsonl"));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const std::vector<nlohmann::json> a = json_lines(read_text(dir_.file("one.jsonl")));
  const std::vector<nlohmann::json> b = json_lines(read_text(dir_.file("two.jsonl")));
  ASSERT_GE(a.size(), 3u) << one.output;
  ASSERT_EQ(a.size(), b.size()) << two.output;
  for (size_t d = 0; d + 1 < a.size(); ++d) {
    if (!a[d].contains("loss")) continue;  // fewer than 2 tokens
    const double la = a[d].at("loss").get<double>(), lb = b[d].at("loss").get<double>();
    EXPECT_NEAR(lb, la, 1e-6 * la) << "document " << d;
  }
  const double shuffled_loss = a[a.size() - 2].at("loss").get<double>();
  for (size_t d = 0; d + 2 < a.size(); ++d) {
    if (a[d].at("tokens").get<int64_t>() < 50) continue;  // a fragment
    EXPECT_LT(a[d].at("loss").get<double>(), shuffled_loss - 0.3) << "document " << d;
  }
}

// TP ranks of generate and score decode alike: launched with different
// arguments (mpirun's `:`), the job ends naming the flag.
TEST_F(ScoreCli, RanksLaunchedDifferentlyAreRefused) {
  write_text(dir_.file("a.txt"), "The cat sees the river.\n");
  write_text(dir_.file("b.txt"), "The queen helps a dog.\n");
  const std::string bin = std::string(MT_BINARY);
  const std::string mpirun2 = "timeout 120 mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -n 1 ";
  const std::string gen = bin + " generate --tensor-model-parallel-size 2 --max-new-tokens 5 --load " +
                          dir_.file("ckpt");
  RunResult r = run(mpirun2 + gen + " --seed 1 : -n 1 " + gen + " --seed 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "hung";
  EXPECT_NE(r.output.find("rank 1 was launched with --seed 2 but rank 0 with --seed 1"),
            std::string::npos)
      << r.output;
  const std::string score = bin + " score --tensor-model-parallel-size 2 --load " +
                            dir_.file("ckpt") + " --input ";
  r = run(mpirun2 + score + dir_.file("a.txt") + " : -n 1 " + score + dir_.file("b.txt"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "hung";
  EXPECT_NE(r.output.find("--input"), std::string::npos) << r.output;
}

TEST_F(ScoreCli, BadInputIsOneClearError) {
  const std::string score = megatron() + " score --load " + dir_.file("ckpt") + " --input ";
  RunResult r = run(score + dir_.file("missing.txt"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cannot open --input"), std::string::npos) << r.output;
  write_text(dir_.file("bad.jsonl"), "{\"text\": \"The cat\"}\n{\"body\": \"x\"}\n");
  r = run(score + dir_.file("bad.jsonl"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("line 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--json-keys"), std::string::npos) << r.output;
}

// --append-eod needs an end-of-document token: this checkpoint's char
// vocabulary was built without one, so the flag is refused in one line (it
// was ignored); a vocabulary built with --append-eod scores the eod too.
TEST_F(ScoreCli, AppendEodNeedsAnEndOfDocumentToken) {
  write_text(dir_.file("doc.txt"), "The cat sees the river.\n");
  const std::string score = megatron() + " score --input " + dir_.file("doc.txt") + " --load ";
  RunResult r = run(score + dir_.file("ckpt") + " --append-eod");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--append-eod: the checkpoint's char tokenizer has no end-of-document "
                          "token"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("; fix: score without --append-eod"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;

  write_text(dir_.file("eod.txt"), corpus_);
  ASSERT_EQ(run(megatron() + " preprocess --input " + dir_.file("eod.txt") + " --output-prefix " +
                dir_.file("eod") + " --append-eod")
                .exit_code,
            0);
  const RunResult t = run(megatron() + " train --data-path " + dir_.file("eod_text_document") +
                          " --vocab-file " + dir_.file("eod_vocab.json") + tiny_model_flags() +
                          " --train-iters 6 --eval-interval 0 --save " + dir_.file("eod_ckpt"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const RunResult plain = run(score + dir_.file("eod_ckpt") + " --log-probs");
  const RunResult eod = run(score + dir_.file("eod_ckpt") + " --log-probs --append-eod");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(eod.exit_code, 0) << eod.output;
  const nlohmann::json a = json_lines(plain.output).at(0), b = json_lines(eod.output).at(0);
  const int64_t eod_id =
      int64_t(nlohmann::json::parse(read_text(dir_.file("eod_vocab.json"))).size()) - 1;
  EXPECT_EQ(b.at("tokens").get<int64_t>(), a.at("tokens").get<int64_t>() + 1);
  EXPECT_EQ(b.at("ids").back().get<int64_t>(), eod_id);
}

}  // namespace score_cli_test
}  // namespace mt::test
