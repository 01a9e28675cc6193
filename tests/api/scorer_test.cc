// megatron::Scorer (include/megatron/scoring.h), `megatron score` as a library
// call, at 1 rank and under `mpirun -n 2` (TP2): its per-document losses are
// `megatron score`'s JSON lines for the same checkpoint and file, bit for bit
// (1 rank: the binary runs beside it); the documents given as texts score as
// the file's; a generated continuation scores as Generator reported each
// token's log-probability; a document of one token predicts none. Its words
// parse as the binary's (FlagHelp, FlagError, the options).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "decoding_checkpoint.h"
#include "megatron/decoding.h"
#include "megatron/scoring.h"

namespace mt::test {
namespace scorer_test {

// `megatron score --log-probs` of `input`: its JSON lines. Run with a clean
// environment: this process's MPI singleton must not leak into the binary's.
std::vector<nlohmann::json> binary_score(const std::string& input) {
  const std::string cmd = "env -i PATH=\"$PATH\" LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH\" HOME=\"$HOME\""
                          " OMP_NUM_THREADS=1 " MT_BINARY " score --load " +
                          decoding_checkpoint() + " --input " + input + " --log-probs 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  std::string out;
  char buf[4096];
  for (size_t n; p != nullptr && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(p != nullptr ? ::pclose(p) : -1, 0) << cmd;
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

void expect_same(const megatron::DocumentScore& a, const megatron::DocumentScore& b, size_t d) {
  EXPECT_EQ(a.ids, b.ids) << d;
  EXPECT_EQ(a.log_probs, b.log_probs) << d;
  EXPECT_EQ(a.tokens, b.tokens) << d;
  EXPECT_EQ(a.sum_log_prob, b.sum_log_prob) << d;
}

TEST(Scorer, PerDocumentLossesAreScoresJsonLines) {
  TempDir tmp;
  const std::string input = rank0_path(tmp.file("docs.jsonl"));
  std::string long_doc;  // past two contexts: scored in windows
  while (long_doc.size() < 2 * size_t(kDecodingContext) + 10) long_doc += "my friend finds a bird. ";
  const std::vector<std::string> docs = {"the cat sees the river.", long_doc, "a"};
  if (world_rank() == 0) {
    std::ofstream out(input);
    for (const std::string& d : docs) out << nlohmann::json{{"text", d}}.dump() << "\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  megatron::ScoreOptions o;
  o.load = decoding_checkpoint();
  o.input = input;
  o.tensor_parallel = world_size();
  megatron::Scorer scorer(o);
  const megatron::Scores r = scorer.score();
  ASSERT_EQ(r.documents.size(), docs.size());
  EXPECT_EQ(r.documents[0].tokens, int64_t(docs[0].size()) - 1);
  EXPECT_EQ(r.documents[1].tokens, int64_t(long_doc.size()) - 1);  // each token after the first once
  EXPECT_EQ(r.documents[2].tokens, 0);
  EXPECT_TRUE(std::isnan(r.documents[2].loss));
  EXPECT_EQ(r.tokens, r.documents[0].tokens + r.documents[1].tokens);
  EXPECT_NEAR(r.loss, -(r.documents[0].sum_log_prob + r.documents[1].sum_log_prob) /
                          double(r.tokens), 1e-12);
  EXPECT_THROW(scorer.score(), std::logic_error);  // once

  if (world_size() == 1) {  // the binary beside this process (one rank)
    const std::vector<nlohmann::json> lines = binary_score(input);
    ASSERT_EQ(lines.size(), docs.size() + 1);
    for (size_t d = 0; d < docs.size(); ++d) {
      const megatron::DocumentScore& s = r.documents[d];
      const nlohmann::json& j = lines[d];
      EXPECT_EQ(j.at("document").get<size_t>(), d);
      EXPECT_EQ(j.at("tokens").get<int64_t>(), s.tokens) << d;
      EXPECT_EQ(j.at("sum_log_prob").get<double>(), s.sum_log_prob) << d;
      EXPECT_EQ(j.at("ids").get<std::vector<int32_t>>(), s.ids) << d;
      EXPECT_EQ(j.at("log_probs").get<std::vector<double>>(), s.log_probs) << d;
      if (s.tokens > 0) {
        EXPECT_EQ(j.at("loss").get<double>(), s.loss) << d;
        EXPECT_EQ(j.at("ppl").get<double>(), s.ppl) << d;
      } else {
        EXPECT_FALSE(j.contains("loss")) << d;
      }
    }
    const nlohmann::json& total = lines.back().at("total");
    EXPECT_EQ(total.at("documents").get<size_t>(), docs.size());
    EXPECT_EQ(total.at("tokens").get<int64_t>(), r.tokens);
    EXPECT_EQ(total.at("loss").get<double>(), r.loss);
    EXPECT_EQ(total.at("ppl").get<double>(), r.ppl);
  }

  // The same documents as texts, and a generated continuation after them:
  // its tokens score as Generator reported them (the same decoder and context).
  megatron::GenerateOptions g;
  g.load = decoding_checkpoint();
  g.prompt = "the queen helps";
  g.max_new_tokens = 10;
  g.seed = 5;
  g.tensor_parallel = world_size();
  const megatron::Generation gen = megatron::Generator(g).generate();
  std::vector<std::string> texts = docs;
  texts.push_back(g.prompt + gen.text);
  megatron::Scorer again(o);
  const megatron::Scores t = again.score(texts);
  ASSERT_EQ(t.documents.size(), texts.size());
  for (size_t d = 0; d < docs.size(); ++d) expect_same(t.documents[d], r.documents[d], d);
  const std::vector<double>& lp = t.documents.back().log_probs;
  ASSERT_EQ(lp.size(), texts.back().size() - 1);
  for (size_t i = 0; i < gen.log_probs.size(); ++i)
    EXPECT_NEAR(lp[lp.size() - gen.log_probs.size() + i], gen.log_probs[i], 1e-12) << i;
}

TEST(ScorerWords, HelpIsAFlagHelpWithTheScoreUsage) {
  try {
    megatron::Scorer s(std::vector<std::string>{"--help"});
    FAIL() << "--help did not throw";
  } catch (const megatron::FlagHelp& h) {
    const std::string usage = h.what();
    EXPECT_EQ(usage.rfind("the loss of a checkpoint on a text or JSONL file, per document (no "
                          "training)\nUsage: score [OPTIONS]\n", 0), 0u)
        << usage;
    EXPECT_NE(usage.find("key/value cache holds"), std::string::npos) << usage;
  }
}

TEST(ScorerWords, AnUnknownFlagIsAFlagErrorNamingIt) {
  try {
    megatron::Scorer s(std::vector<std::string>{"--load", "c", "--input", "x.txt", "--json-key", "t"});
    FAIL() << "--json-key did not throw";
  } catch (const megatron::FlagHelp& h) {
    FAIL() << "a FlagHelp: " << h.what();
  } catch (const megatron::FlagError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown flag --json-key; the nearest flag of `megatron score` is --json-keys; "
              "see `megatron score --help`");
  }
}

TEST(ScorerWords, TheFlagsBecomeTheOptions) {
  const megatron::Scorer s(std::vector<std::string>{"--load", "c", "--input", "d.jsonl",
                                                    "--json-keys", "body", "--append-eod",
                                                    "--expert-model-parallel-size", "2"});
  const megatron::ScoreOptions& o = s.options();
  EXPECT_EQ(o.load, "c");
  EXPECT_EQ(o.input, "d.jsonl");
  EXPECT_EQ(o.json_key, "body");
  EXPECT_TRUE(o.append_eod);
  EXPECT_EQ(o.tensor_parallel, 1);
  EXPECT_EQ(o.expert_parallel, 2);
  EXPECT_THROW(megatron::Scorer(megatron::ScoreOptions{}), std::invalid_argument);  // no load
}

}  // namespace scorer_test
}  // namespace mt::test
