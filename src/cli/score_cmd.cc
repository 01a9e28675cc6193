// `megatron score`: the loss of a checkpoint on given text, per document,
// without training: a .txt file (documents separated by blank lines, as
// `preprocess` reads them) or JSONL (one document per line under a key).
//
// Each document is tokenized with the checkpoint's tokenizer and cut as
// Megatron's GPT dataset cuts a sample: windows of seq-length predictions,
// the next window starting from the last token of the previous one (the
// model never sees past its context). A token's log-probability is over the
// real vocabulary (padding rows excluded, as after `convert` to Hugging
// Face), in double.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "cli/commands.h"
#include "cli/decoding_model.h"
#include "cli/strict_numbers.h"
#include "core/error.h"
#include "data/preprocess_pipeline.h"
#include "dist/mpi_env.h"
#include "dist/parallel_state.h"
#include "train/run_args_check.h"

namespace mt {
namespace {

struct ScoreArgs {
  std::string load, input, json_key = "text", output_json;
  bool append_eod = false, log_probs = false;
  int tp = 1;
};

// The documents of a .txt or .jsonl file, in order.
std::vector<std::string> read_documents(const ScoreArgs& a) {
  std::ifstream in(a.input, std::ios::binary);
  MT_CHECK(in.good(), "cannot open --input ", a.input, "; fix: give an existing .txt or .jsonl file");
  std::vector<std::string> docs;
  const bool jsonl = a.input.size() >= 6 && a.input.compare(a.input.size() - 6, 6, ".jsonl") == 0;
  if (!jsonl) {
    ParagraphSplitter split([&](const std::string& doc, int64_t) { docs.push_back(doc); });
    std::string buf(1 << 20, '\0');
    int64_t offset = 0;
    while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
      split.feed(std::string_view(buf.data(), size_t(in.gcount())), offset);
      offset += in.gcount();
    }
    split.finish();
    return docs;
  }
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    MT_CHECK(!j.is_discarded() && j.is_object() && j.contains(a.json_key) &&
                 j.at(a.json_key).is_string(),
             a.input, " line ", n, " is not a JSON object with a string \"", a.json_key,
             "\"; fix: one object per line, or name the key with --json-keys");
    docs.push_back(j.at(a.json_key).get<std::string>());
  }
  return docs;
}

struct DocScore {
  int64_t predicted = 0;  // tokens whose probability was scored
  double sum_log_prob = 0;
  std::vector<int32_t> ids;
  std::vector<double> log_probs;  // of ids[1..]
};

DocScore score_document(DecodingModel& m, const std::string& text, bool append_eod) {
  DocScore s;
  s.ids = m.tok->tokenize(text);
  if (append_eod && m.tok->eod() >= 0) s.ids.push_back(m.tok->eod());
  const int64_t n = int64_t(s.ids.size()), window = m.dec->capacity();
  for (int64_t start = 0; start + 1 < n; start += window) {
    m.dec->reset();
    const int64_t end = std::min(n - 1, start + window);  // predicts ids[start+1 .. end]
    for (int64_t i = start; i < end; ++i) {
      const float* logits = m.dec->step(s.ids[size_t(i)]);
      const double lp = log_prob(logits, m.cfg.vocab_size, s.ids[size_t(i + 1)]);
      s.log_probs.push_back(lp);
      s.sum_log_prob += lp;
      ++s.predicted;
    }
  }
  return s;
}

}  // namespace

Command add_score_command(CLI::App& app) {
  auto a = std::make_shared<ScoreArgs>();
  app.add_option("--load", a->load, "checkpoint directory (a --save of megatron train)")->required();
  app.add_option("--input", a->input, ".txt (documents separated by blank lines) or .jsonl")
      ->required();
  app.add_option("--json-keys", a->json_key, "JSONL: the key holding each document's text");
  app.add_flag("--append-eod", a->append_eod,
               "end every document with the end-of-document token (and score it), as "
               "preprocess --append-eod wrote the training data");
  app.add_option("--output-json", a->output_json,
                 "write the JSON lines here instead of stdout (one per document, then a total)");
  app.add_flag("--log-probs", a->log_probs,
               "also write each document's token ids and every predicted token's log-probability");
  app.add_option("--tensor-model-parallel-size", a->tp,
                 "TP size to score with (launch that many ranks with mpirun)");
  app.footer(
      "Output: one JSON line per document, {\"document\", \"tokens\" (predicted), \"loss\" (mean\n"
      "  negative log-likelihood, nats), \"ppl\", \"sum_log_prob\"[, \"ids\", \"log_probs\"]}, then\n"
      "  {\"total\": {\"documents\", \"tokens\", \"loss\", \"ppl\"}} over all predicted tokens.\n"
      "  A document longer than the model's context is scored in windows of --seq-length\n"
      "  predictions, each starting from the previous window's last token (as Megatron's\n"
      "  samples overlap by one token); a document of fewer than 2 tokens has none to score.");
  make_integer_options_strict(app);
  return [a]() {
    MT_CHECK(a->tp >= 1, "--tensor-model-parallel-size ", a->tp, " must be >= 1");
    MpiEnv mpi;
    MT_CHECK(mpi.world_size() == a->tp, "score with --tensor-model-parallel-size ", a->tp,
             " needs exactly that many ranks; got world size ", mpi.world_size(),
             "; fix: mpirun -n ", a->tp, " megatron score ...");
    ParallelConfig pc;
    pc.tp = a->tp;
    ParallelState ps(pc);
    // Every rank decodes the same documents (train/run_args_check.h).
    check_same_arguments({{"--load", a->load},
                          {"--input", a->input},
                          {"--json-keys", a->json_key},
                          {"--append-eod", a->append_eod ? "true" : "false"}},
                         ps.world_comm);
    const bool rank0 = ps.world_rank == 0;
    const std::vector<std::string> docs = read_documents(*a);
    DecodingModel model = load_for_decoding(a->load, ps, "score");
    std::string out;
    int64_t total_tokens = 0;
    double total_log_prob = 0;
    for (size_t d = 0; d < docs.size(); ++d) {
      const DocScore s = score_document(model, docs[d], a->append_eod);
      total_tokens += s.predicted;
      total_log_prob += s.sum_log_prob;
      nlohmann::json j = {{"document", d}, {"tokens", s.predicted},
                          {"sum_log_prob", s.sum_log_prob}};
      if (s.predicted > 0) {
        j["loss"] = -s.sum_log_prob / double(s.predicted);
        j["ppl"] = std::exp(-s.sum_log_prob / double(s.predicted));
      }
      if (a->log_probs) {
        j["ids"] = s.ids;
        j["log_probs"] = s.log_probs;
      }
      out += j.dump() + "\n";
    }
    nlohmann::json total = {{"documents", docs.size()}, {"tokens", total_tokens}};
    if (total_tokens > 0) {
      total["loss"] = -total_log_prob / double(total_tokens);
      total["ppl"] = std::exp(-total_log_prob / double(total_tokens));
    }
    out += nlohmann::json{{"total", total}}.dump() + "\n";
    if (!rank0) return 0;
    if (a->output_json.empty())
      std::fputs(out.c_str(), stdout);
    else
      atomic_write_text(a->output_json, out);
    std::fprintf(stderr, "score: %zu documents, %lld tokens scored, loss %.6f, ppl %.4f\n",
                 docs.size(), static_cast<long long>(total_tokens),
                 total_tokens > 0 ? -total_log_prob / double(total_tokens) : 0.0,
                 total_tokens > 0 ? std::exp(-total_log_prob / double(total_tokens)) : 0.0);
    return 0;
  };
}

}  // namespace mt
