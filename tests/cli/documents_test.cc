// Documents inside a sequence (Megatron's --reset-position-ids,
// --reset-attention-mask, --eod-mask-loss, and --calculate-per-token-loss
// over the loss mask they make): on data of short documents, several to a
// sample, a Llama-shaped model (RoPE) trains equal to one rank under TP2 with
// SP, PP2, CP2 (documents crossing the chunks) and DP2 with the distributed
// optimizer, and a GPT-2-shaped one (learned positions) under TP2 and CP2;
// the flags change the losses, are recorded in the checkpoint, and a
// tokenizer without an end-of-document token is refused by name. (The
// model-level proofs — a packed sample equals its documents trained apart,
// and both normalizations on a hand example — are tests/model/documents_test.cc.)
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "layout_match_util.h"

namespace mt::test {
namespace documents_test {

// One sentence per document (~30 characters), so a 48-token sample holds one
// or two end-of-document tokens at varying places.
std::string short_documents() {
  std::string text = synthetic_corpus(120), out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '.' && i + 1 < text.size() && text[i + 1] == ' ') {
      out += "\n\n";
      ++i;
    }
  }
  return out;
}

const char* kDocs = " --reset-position-ids --reset-attention-mask --eod-mask-loss";

std::string llama_flags(const std::string& extra) {
  return " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 48"
         " --max-position-embeddings 48 --micro-batch-size 2 --global-batch-size 8"
         " --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2"
         " --weight-decay 0.1 --clip-grad 1.0 --split 90,10,0 --peak-tflops 1 --log-interval 1"
         " --normalization RMSNorm --position-embedding-type rope --swiglu --ffn-hidden-size 64"
         " --group-query-attention --num-query-groups 2 --disable-bias-linear"
         " --untie-embeddings-and-output-weights --hidden-dropout 0.1 --attention-dropout 0.1"
         " --train-iters 6 --eval-interval 3 --eval-iters 1" +
         extra;
}

std::string gpt2_flags(const std::string& extra) {
  return " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 48"
         " --max-position-embeddings 48 --micro-batch-size 2 --global-batch-size 8"
         " --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2"
         " --split 90,10,0 --peak-tflops 1 --log-interval 1 --train-iters 6 --eval-interval 3"
         " --eval-iters 1" +
         extra;
}

constexpr double kTol = 1e-6;

TEST(Documents, LlamaLayoutsMatchOneRank) {
  expect_layouts_match_one_rank(
      llama_flags(kDocs),
      {{"tp2_sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
       {"pp2", 2, " --pipeline-model-parallel-size 2"},
       {"cp2", 2, " --context-parallel-size 2"},
       {"dp2_zero", 2, " --use-distributed-optimizer"}},
      kTol, {"loss"}, "documents, Llama", {}, short_documents(), " --append-eod");
}

// Learned position embeddings read the restarted positions; per-token loss
// sums the counted tokens over the micro-batches and DP ranks.
TEST(Documents, Gpt2AndPerTokenLossMatchOneRank) {
  expect_layouts_match_one_rank(
      gpt2_flags(std::string(kDocs) + " --calculate-per-token-loss"),
      {{"tp2", 2, " --tensor-model-parallel-size 2"},
       {"cp2", 2, " --context-parallel-size 2"},
       {"dp2", 2, ""}},
      kTol, {"loss"}, "documents, GPT-2, per-token loss", {}, short_documents(), " --append-eod");
}

TEST(Documents, FlagsChangeTheLossesAndAreRecorded) {
  TempDir dir;
  const std::string data = prepare_data(dir, short_documents(), " --append-eod");
  auto train = [&](const std::string& extra, const std::string& tag) {
    const RunResult r = run(megatron() + " train" + data + llama_flags(extra) +
                            " --save " + dir.file(tag) + " --log-json " + dir.file(tag + ".json"));
    EXPECT_EQ(r.exit_code, 0) << tag << "\n" << r.output;
    return read_log_json(dir.file(tag + ".json"));
  };
  const JsonLogLines plain = train("", "plain"), docs = train(kDocs, "docs"),
                     per_token = train(std::string(kDocs) + " --calculate-per-token-loss", "tok");
  ASSERT_EQ(docs.train.size(), 6u);
  ASSERT_EQ(per_token.train.size(), 6u);
  auto loss = [](const JsonLogLines& l, int64_t it) { return l.train.at(it).at("loss").get<double>(); };
  EXPECT_GT(rel(loss(plain, 6), loss(docs, 6)), 1e-3) << "the document flags changed nothing";
  // Iteration 1: the same weights, the same counted tokens: the same loss;
  // then the gradients differ (micro-batches count different tokens).
  EXPECT_LT(rel(loss(docs, 1), loss(per_token, 1)), 1e-9);
  EXPECT_GT(rel(loss(docs, 3), loss(per_token, 3)), 1e-7) << "per-token loss changed nothing";
  const nlohmann::json args =
      nlohmann::json::parse(read_text(dir.file("docs") + "/iter_0000006/meta.json"))
          .at("args")
          .at("training");
  EXPECT_EQ(args.at("reset_position_ids"), true);
  EXPECT_EQ(args.at("reset_attention_mask"), true);
  EXPECT_EQ(args.at("eod_mask_loss"), true);
}

// A resume that takes the tokenizer from the checkpoint (no tokenizer flags)
// finds the documents by its end-of-document token too: the losses of the
// uninterrupted run.
TEST(Documents, ResumeWithTheCheckpointsTokenizerKeepsTheDocuments) {
  TempDir dir;
  const std::string data = prepare_data(dir, short_documents(), " --append-eod");
  std::string flags = llama_flags(kDocs);
  flags.replace(flags.find("--train-iters 6"), 15, "--train-iters 4");
  flags.replace(flags.find("--eval-interval 3"), 17, "--eval-interval 0");
  const RunResult full = run(megatron() + " train" + data + flags + " --log-json " + dir.file("full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const RunResult first = run(megatron() + " train" + data + flags + " --exit-interval 2 --save " +
                              dir.file("c"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string no_vocab = data.substr(0, data.find(" --vocab-file"));
  const RunResult rest = run(megatron() + " train" + no_vocab + flags + " --load " + dir.file("c") +
                             " --log-json " + dir.file("rest.json"));
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  const JsonLogLines a = read_log_json(dir.file("full.json")), b = read_log_json(dir.file("rest.json"));
  ASSERT_EQ(b.train.size(), 2u);
  for (const auto& [it, j] : b.train)
    EXPECT_EQ(j.at("loss").get<double>(), a.train.at(it).at("loss").get<double>()) << it;
}

TEST(Documents, RefusedWithoutAnEndOfDocumentToken) {
  TempDir dir;
  const std::string data = prepare_data(dir, short_documents());  // no --append-eod
  const RunResult r = run(megatron() + " train" + data + llama_flags(" --eod-mask-loss"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no end-of-document token"), std::string::npos) << r.output;
}

}  // namespace documents_test
}  // namespace mt::test
