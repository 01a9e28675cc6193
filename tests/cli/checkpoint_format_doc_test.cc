// docs/checkpoint-format.md against what the code writes: every name and
// field in its machine-readable section ("```checkpoint-fields") is written
// by a real save, and every one a save writes is listed. Three saves cover the
// format: GPT-2 on one rank (plain optimizer), a Llama-style model in bf16
// with the distributed optimizer on 2 ranks (ZeRO slices, main weights), and
// a Llama-style MoE model at EP 2 with the distributed optimizer (expert
// directories, expert-DP slices).
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "cli_test_util.h"

namespace mt::test {
namespace checkpoint_format_doc_test {

namespace fs = std::filesystem;
using Names = std::set<std::string>;

// section -> names, from the doc's fenced block.
std::map<std::string, Names> documented() {
  const std::string doc = read_text(std::string(MT_SOURCE_DIR) + "/docs/checkpoint-format.md");
  const std::string open = "```checkpoint-fields\n";
  const size_t b = doc.find(open);
  EXPECT_NE(b, std::string::npos) << "no ```checkpoint-fields block in docs/checkpoint-format.md";
  const size_t e = doc.find("```", b + open.size());
  std::istringstream block(doc.substr(b + open.size(), e - b - open.size()));
  std::map<std::string, Names> out;
  for (std::string line; std::getline(block, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::istringstream items(line.substr(colon + 2));
    for (std::string item; items >> item;) out[line.substr(0, colon)].insert(item);
  }
  return out;
}

// What one saved iteration holds, by the doc's sections.
std::map<std::string, Names> written(const std::string& iter_dir) {
  std::map<std::string, Names> w;
  const auto meta = nlohmann::json::parse(read_text(iter_dir + "/meta.json"));
  for (const auto& [k, v] : meta.items()) w["meta.json"].insert(k);
  for (const auto& [path, rec] : meta.at("files").items())
    for (const auto& [k, v] : rec.items()) w["meta.json files entry"].insert(k);
  for (const auto& [k, v] : meta.at("args").items()) w["meta.json args"].insert(k);
  for (const auto& [k, v] : meta.at("args").at("model").items()) w["meta.json args.model"].insert(k);
  const std::regex layer(R"(\.layers\.[0-9]+\.)"), expert(R"(\.local_experts\.[0-9]+\.)");
  for (const auto& e : fs::recursive_directory_iterator(iter_dir)) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() != ".safetensors") continue;
    SafetensorsReader r(e.path().string());
    if (f == "model.safetensors") {
      for (const auto& [k, v] : r.metadata()) w["model.safetensors metadata"].insert(k);
      const auto params = nlohmann::json::parse(r.metadata().at("params"));  // kept alive
      for (const auto& [name, spec] : params.items())
        for (const auto& [k, v] : spec.items()) w["model.safetensors params entry"].insert(k);
      for (const std::string& n : r.names())
        w["parameters"].insert(std::regex_replace(std::regex_replace(n, layer, ".layers.{L}."),
                                                  expert, ".local_experts.{E}."));
    } else {
      for (const auto& [k, v] : r.metadata()) w["optim metadata"].insert(k);
      for (const std::string& n : r.names()) {
        const size_t dot = n.find('.');
        w["optim tensor prefixes"].insert(n.substr(0, dot + 1));
      }
    }
  }
  return w;
}

std::string join(const Names& s) {
  std::string out;
  for (const std::string& x : s) out += " " + x;
  return out;
}

void expect_same(const Names& doc, const Names& code, const std::string& section) {
  Names missing, undocumented;
  for (const std::string& d : doc)
    if (!code.count(d)) missing.insert(d);
  for (const std::string& c : code)
    if (!doc.count(c)) undocumented.insert(c);
  EXPECT_TRUE(missing.empty()) << section << ": documented but not written:" << join(missing);
  EXPECT_TRUE(undocumented.empty()) << section << ": written but not in docs/checkpoint-format.md:"
                                    << join(undocumented);
}

TEST(CheckpointFormatDoc, EveryDocumentedNameIsWrittenAndEveryWrittenNameDocumented) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(40));
  const std::string common = data + tiny_model_flags() + " --eval-interval 0 --train-iters 6";
  const RunResult gpt = run(megatron() + " train" + common + " --save " + dir.file("gpt"));
  ASSERT_EQ(gpt.exit_code, 0) << gpt.output;
  const RunResult llama =
      run(mpirun(2) + " train" + common + " --save " + dir.file("llama") +
          " --bf16 --use-distributed-optimizer --normalization RMSNorm --position-embedding-type "
          "rope --swiglu --untie-embeddings-and-output-weights --disable-bias-linear "
          "--group-query-attention --num-query-groups 2");
  ASSERT_EQ(llama.exit_code, 0) << llama.output;
  const RunResult moe =
      run(mpirun(2) + " train" + common + " --save " + dir.file("moe") +
          " --use-distributed-optimizer --normalization RMSNorm --position-embedding-type rope "
          "--swiglu --untie-embeddings-and-output-weights --disable-bias-linear --num-experts 4 "
          "--moe-router-topk 2 --expert-model-parallel-size 2");
  ASSERT_EQ(moe.exit_code, 0) << moe.output;
  auto doc = documented();
  auto a = written(dir.file("gpt/iter_0000006")), b = written(dir.file("llama/iter_0000006"));
  auto c = written(dir.file("moe/iter_0000006"));

  // Top-level meta.json fields: the always-written ones in both saves; any
  // other field written must be among the conditional ones.
  for (const std::string& f : doc["meta.json"]) {
    EXPECT_TRUE(a["meta.json"].count(f)) << "meta.json field '" << f << "' not written (GPT-2 run)";
    EXPECT_TRUE(b["meta.json"].count(f)) << "meta.json field '" << f << "' not written (Llama run)";
  }
  for (const std::string& f : doc["meta.json"])
    EXPECT_TRUE(c["meta.json"].count(f)) << "meta.json field '" << f << "' not written (MoE run)";
  EXPECT_TRUE(c["meta.json"].count("expert_model_parallel_size"));
  for (const auto* w : {&a, &b, &c})
    for (const std::string& f : w->at("meta.json"))
      EXPECT_TRUE(doc["meta.json"].count(f) || doc["meta.json (some runs)"].count(f))
          << "meta.json field '" << f << "' written but not documented";
  EXPECT_FALSE(doc["meta.json (some runs)"].empty());
  for (const char* section : {"meta.json files entry", "meta.json args", "meta.json args.model",
                              "model.safetensors metadata", "model.safetensors params entry",
                              "optim metadata", "optim tensor prefixes"}) {
    Names all = a[section];
    all.insert(b[section].begin(), b[section].end());
    all.insert(c[section].begin(), c[section].end());
    expect_same(doc[section], all, section);
  }
  expect_same(doc["gpt2 parameters"], a["parameters"], "gpt2 parameters");
  expect_same(doc["llama parameters"], b["parameters"], "llama parameters");
  expect_same(doc["moe parameters"], c["parameters"], "moe parameters");
}

}  // namespace checkpoint_format_doc_test
}  // namespace mt::test
