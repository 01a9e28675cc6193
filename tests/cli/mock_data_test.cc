// `megatron train --mock-data`: Megatron's MockGPTDataset (data/mock_gpt_dataset.h)
// with NullTokenizer and with a real tokenizer: it learns, evaluates, saves,
// resumes exactly, runs the same on DP 2, and refuses or notes what Megatron does.
#include <sstream>

#include "cli_test_util.h"

namespace mt::test {
namespace mock_data_test {

// NullTokenizer --vocab-size 127: vocabulary 128, eod 127; mock ids 1, 2, ... mod 128.
const std::string kNull = " --tokenizer-type NullTokenizer --vocab-size 127";

// `flags` with `part` replaced by `by`.
std::string replaced(std::string flags, const std::string& part, const std::string& by) {
  const size_t at = flags.find(part);
  EXPECT_NE(at, std::string::npos) << part;
  if (at != std::string::npos) flags.replace(at, part.size(), by);
  return flags;
}

// Lines of `output` that hold "error" (a refusal is exactly one).
int error_lines(const std::string& output) {
  int n = 0;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) n += line.find("error") != std::string::npos;
  return n;
}

std::string mock_flags() {
  return " --mock-data" + kNull +
         " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32"
         " --micro-batch-size 4 --global-batch-size 8 --lr 1e-2 --min-lr 3e-4"
         " --lr-decay-style cosine --lr-warmup-iters 1 --weight-decay 0.1 --clip-grad 1.0"
         " --peak-tflops 1 --log-interval 1";
}

TEST(MockData, NullTokenizerLearnsEvaluatesAndSaves) {
  TempDir dir;
  const RunResult r = run(megatron() + " train" + mock_flags() +
                          " --train-iters 30 --eval-interval 15 --eval-iters 2 --save " +
                          dir.file("ckpt") + " --log-json " + dir.file("log.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.output.find("data: --mock-data: Megatron's MockGPTDataset") != std::string::npos)
      << r.output;
  const JsonLogLines log = read_log_json(dir.file("log.json"));
  ASSERT_EQ(log.train.size(), 30u);
  ASSERT_EQ(log.eval.size(), 2u) << r.output;
  // Counting sequences: far below the uniform ln(128) = 4.85 after 30 steps (2.4 here).
  const double first = log.train.at(1).at("loss").get<double>();
  const double last = log.train.at(30).at("loss").get<double>();
  EXPECT_GT(first, 4.0);
  EXPECT_LT(last, 0.6 * first);
  EXPECT_LT(log.eval.back().at("val_loss").get<double>(), 0.6 * first);
  // The checkpoint records what the data was.
  const nlohmann::json meta =
      nlohmann::json::parse(read_text(dir.file("ckpt/iter_0000030/meta.json")));
  const nlohmann::json& ds = meta.at("args").at("datasets");
  ASSERT_EQ(ds.size(), 1u) << ds.dump();
  EXPECT_EQ(ds[0].at("mock"), "MockGPTDataset");
  EXPECT_EQ(ds[0].at("eod"), 127);
  EXPECT_EQ(ds[0].at("vocab_size"), 128);
}

// 4 iterations straight == 2, save, resume 2 (dropout on: its keys resume too);
// a resume on a data path instead says the data changed source.
TEST(MockData, ResumeContinuesTheSameDataOrder) {
  TempDir dir;
  const std::string common = megatron() + " train" + mock_flags() +
                             " --train-iters 4 --eval-interval 0 --hidden-dropout 0.1"
                             " --attention-dropout 0.1";
  const RunResult straight = run(common + " --log-json " + dir.file("a.json"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const RunResult first = run(common + " --exit-interval 2 --save " + dir.file("ckpt") +
                              " --log-json " + dir.file("b.json"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const RunResult second = run(common + " --load " + dir.file("ckpt") + " --log-json " +
                               dir.file("b.json"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(second.output.find("was trained on"), std::string::npos) << second.output;
  const JsonLogLines a = read_log_json(dir.file("a.json")), b = read_log_json(dir.file("b.json"));
  ASSERT_EQ(a.train.size(), 4u);
  ASSERT_EQ(b.train.size(), 4u);
  for (int64_t it = 1; it <= 4; ++it)
    EXPECT_EQ(a.train.at(it).at("loss").get<double>(), b.train.at(it).at("loss").get<double>())
        << "iteration " << it;

  // The same checkpoint resumed on a NullTokenizer .bin/.idx: noted, goes on.
  std::string ids;
  for (int d = 0; d < 40; ++d) ids += "{\"text\": \"" + std::to_string(d % 100 + 1) + " 5 9\"}\n";
  write_text(dir.file("ids.jsonl"), ids);
  const RunResult pre = run(megatron() + " preprocess --input " + dir.file("ids.jsonl") +
                            " --output-prefix " + dir.file("ids") +
                            " --tokenizer-type NullTokenizer --vocab-size 127 --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  const std::string real =
      replaced(common, " --mock-data", " --data-path " + dir.file("ids_text_document"));
  const RunResult switched = run(real + " --train-iters 5 --load " + dir.file("ckpt"));
  ASSERT_EQ(switched.exit_code, 0) << switched.output;
  EXPECT_NE(switched.output.find("was trained on --mock-data and this run reads a data path"),
            std::string::npos)
      << switched.output;
}

// DP 2 reads the same global batches as one rank.
TEST(MockData, TwoDataParallelRanksMatchOne) {
  TempDir dir;
  const std::string flags = mock_flags() + " --train-iters 3 --eval-interval 3 --eval-iters 1";
  const RunResult one = run(megatron() + " train" + flags + " --log-json " + dir.file("1.json"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const RunResult two = run(mpirun(2) + " train" + flags + " --log-json " + dir.file("2.json"));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_same_losses(read_log_json(dir.file("1.json")), read_log_json(dir.file("2.json")),
                     "dp2", 1e-6);
}

// A real tokenizer gives only the eod and the vocabulary the ids wrap at
// (Megatron's SentencePieceTokenizer: the model's pieces and its added
// special tokens).
TEST(MockData, RealTokenizerGivesTheEod) {
  TempDir dir;
  int pieces = 0;
  add_hf_tokenizer_files("llama", dir, dir.file("hf"), &pieces);  // a SentencePiece model
  const std::string flags =
      replaced(mock_flags(), kNull, " --tokenizer-type SentencePieceTokenizer --tokenizer-model " +
                                        dir.file("hf/tokenizer.model"));
  const RunResult r = run(megatron() + " train" + flags + " --train-iters 2 --eval-interval 0 "
                          "--save " + dir.file("ckpt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json args =
      nlohmann::json::parse(read_text(dir.file("ckpt/iter_0000002/meta.json"))).at("args");
  const nlohmann::json& tok = args.at("tokenizer");
  const nlohmann::json& ds = args.at("datasets").at(0);
  EXPECT_GE(tok.at("vocab_size").get<int>(), pieces);
  EXPECT_EQ(ds.at("vocab_size"), tok.at("vocab_size"));
  EXPECT_EQ(ds.at("eod"), tok.at("eod"));
  EXPECT_GE(ds.at("eod").get<int>(), 0);
  EXPECT_NE(r.output.find("mod " + tok.at("vocab_size").dump() + " then eod " +
                          tok.at("eod").dump()),
            std::string::npos)
      << r.output;
}

TEST(MockData, WrongCombinationsAreOneLine) {
  TempDir dir;
  const RunResult both = run(megatron() + " train" + mock_flags() + " --train-iters 2 "
                             "--data-path " + dir.file("x_text_document"));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("--mock-data and --data-path are both given"), std::string::npos)
      << both.output;
  EXPECT_EQ(error_lines(both.output), 1) << both.output;
  const std::string no_tok = replaced(mock_flags(), kNull, "");
  const RunResult bare = run(megatron() + " train" + no_tok + " --train-iters 2");
  EXPECT_NE(bare.exit_code, 0);
  EXPECT_NE(bare.output.find("--mock-data without a tokenizer"), std::string::npos) << bare.output;
  EXPECT_NE(bare.output.find("fix: --tokenizer-type NullTokenizer"), std::string::npos);
  EXPECT_EQ(error_lines(bare.output), 1) << bare.output;
  // --split is read past, as in Megatron-LM, with a note.
  const RunResult split = run(megatron() + " train" + mock_flags() +
                              " --train-iters 2 --eval-interval 0 --split 98,2,0");
  ASSERT_EQ(split.exit_code, 0) << split.output;
  EXPECT_NE(split.output.find("--split 98,2,0 is not read with --mock-data"), std::string::npos)
      << split.output;
}

}  // namespace mock_data_test
}  // namespace mt::test
