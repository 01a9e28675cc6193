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
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "cli/commands.h"
#include "decoding/decoding_model.h"
#include "model/sampling.h"
#include "flags/strict_numbers.h"
#include "core/error.h"
#include "core/output_guard.h"
#include "core/file_kind.h"
#include "data/preprocess_pipeline.h"
#include "comm/mpi_env.h"
#include "comm/parallel_state.h"
#include "args/run_args_check.h"

namespace mt {
namespace {

struct ScoreArgs {
  std::string load, input, json_key = "text", output_json;
  bool append_eod = false, log_probs = false, skip_memory_check = false;
  DecodingLayout layout;
};

// Before anything is read or written: --output-json must not replace the
// --input text or a file of the --load checkpoint (core/output_guard.h: by
// path, link or inode, or inside the checkpoint's folders).
void check_score_paths(const ScoreArgs& a) {
  OutputGuard g;
  g.reads_dir("--load", a.load, OutputGuard::checkpoint_names());
  g.reads_file("--input", a.input);
  g.writes_file("--output-json", a.output_json);
  g.check();
}

bool is_jsonl(const std::string& path) {
  return path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
}

// The documents of a .txt or .jsonl stream, in order; *bytes: how many it read.
std::vector<std::string> read_document_stream(const ScoreArgs& a, std::istream& in,
                                              int64_t* bytes) {
  std::vector<std::string> docs;
  *bytes = 0;
  if (!is_jsonl(a.input)) {
    ParagraphSplitter split([&](const std::string& doc, int64_t) { docs.push_back(doc); });
    std::string buf(1 << 20, '\0');
    while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
      split.feed(std::string_view(buf.data(), size_t(in.gcount())), *bytes);
      *bytes += in.gcount();
    }
    split.finish();
    return docs;
  }
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    *bytes += int64_t(line.size()) + 1;
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

// The documents of --input, in order. A directory, an empty file or one of
// blank lines only is an error naming it (not a total of 0 tokens, loss 0).
std::vector<std::string> read_documents(const ScoreArgs& a) {
  struct stat st {};
  MT_CHECK(::stat(a.input.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), "--input ", a.input,
           " is ", file_kind(st.st_mode), "; fix: give a .txt or .jsonl file");
  std::ifstream in(a.input, std::ios::binary);
  MT_CHECK(in.good(), "cannot open --input ", a.input, "; fix: give an existing .txt or .jsonl file");
  int64_t bytes = 0;
  std::vector<std::string> docs = read_document_stream(a, in, &bytes);
  MT_CHECK(!in.bad(), "cannot read --input ", a.input, "; fix: give a readable file");
  // .txt: "\n\n \n\n\n" splits (as preprocess splits) into " " and "\n", blank lines all
  const bool blank = std::all_of(docs.begin(), docs.end(), [](const std::string& d) {
    return d.find_first_not_of(" \t\r\n") == std::string::npos;
  });
  MT_CHECK(!docs.empty() && (is_jsonl(a.input) || !blank), "--input ", a.input, bytes == 0 ? " is empty" : " has only blank lines",
           ": no document to score; fix: give text (.txt: documents separated by blank lines; "
           ".jsonl: one {\"", a.json_key, "\": \"...\"} object per line)");
  return docs;
}

struct DocScore {
  int64_t predicted = 0;  // tokens whose probability was scored
  double sum_log_prob = 0;
  std::vector<double> log_probs;  // of ids[1..]
};

// Windows of the model's context, each starting from the previous one's last token.
DocScore score_document(DecodingModel& m, const std::vector<int32_t>& ids) {
  DocScore s;
  const int64_t n = int64_t(ids.size()), window = m.context();
  for (int64_t start = 0; start + 1 < n; start += window) {
    m.dec->reset();
    const int64_t end = std::min(n - 1, start + window);  // predicts ids[start+1 .. end]
    for (int64_t i = start; i < end; ++i) {
      const float* logits = m.dec->step(ids[size_t(i)]);
      const double lp = log_prob(logits, m.cfg.vocab_size, ids[size_t(i + 1)]);
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
               "preprocess --append-eod wrote the training data; refused when the checkpoint's "
               "tokenizer has none");
  app.add_option("--output-json", a->output_json,
                 "write the JSON lines here instead of stdout (one per document, then a total)");
  app.add_flag("--log-probs", a->log_probs,
               "also write each document's token ids and every predicted token's log-probability");
  add_decoding_layout_options(app, a->layout,
                              "TP size to score with (launch that many ranks with mpirun)");
  app.add_flag("--skip-memory-check", a->skip_memory_check,
               "allocate even if weights and key/value cache exceed the host's available memory");
  app.footer(
      "Output: one JSON line per document, {\"document\", \"tokens\" (predicted), \"loss\" (mean\n"
      "  negative log-likelihood, nats), \"ppl\", \"sum_log_prob\"[, \"ids\", \"log_probs\"]}, then\n"
      "  {\"total\": {\"documents\", \"tokens\", \"loss\", \"ppl\"}} over all predicted tokens.\n"
      "  A document longer than the model's context (--max-position-embeddings, by default\n"
      "  --seq-length) is scored in windows of that many predictions, each starting from the\n"
      "  previous window's last token (as Megatron's samples overlap by one token); a document\n"
      "  of fewer than 2 tokens has none to score. The key/value cache holds the longest\n"
      "  window; its size is said on stderr, and one that does not fit the host's available\n"
      "  memory is refused before anything is allocated. An --input that is a directory, empty\n"
      "  or only blank lines is an error, and so is an --output-json that is the --input.");
  make_integer_options_strict(app);
  return [a]() {
    check_score_paths(*a);
    MpiEnv mpi;
    const ParallelConfig pc = decoding_parallel_config(a->layout, mpi.world_size(), "score");
    ParallelState ps(pc);
    // Every rank decodes the same documents (args/run_args_check.h).
    check_same_arguments({{"--load", a->load},
                          {"--input", a->input},
                          {"--json-keys", a->json_key},
                          {"--append-eod", a->append_eod ? "true" : "false"}},
                         ps.world_comm);
    const bool rank0 = ps.world_rank == 0;
    const std::vector<std::string> docs = read_documents(*a);
    DecodingModel model = open_for_decoding(a->load, ps, "score");
    MT_CHECK(!a->append_eod || model.tok->eod() >= 0, "--append-eod: the checkpoint's ",
             model.tok->type(), " tokenizer has no end-of-document token (a char vocabulary has "
             "one only when preprocess built it with --append-eod), so its training data had none "
             "either; fix: score without --append-eod");
    std::vector<std::vector<int32_t>> ids(docs.size());
    size_t longest = 0;  // the document of most tokens
    for (size_t d = 0; d < docs.size(); ++d) {
      ids[d] = model.tok->tokenize(docs[d]);
      if (a->append_eod) ids[d].push_back(model.tok->eod());
      if (ids[d].size() > ids[longest].size()) longest = d;
    }
    // The cache holds the longest window: its predictions, at most the context.
    const int64_t n_longest = int64_t(ids[longest].size());
    const int64_t positions = std::clamp<int64_t>(n_longest - 1, 1, model.context());
    load_decoder(model, ps, positions,
                 "shorten the longest document (document " + std::to_string(longest) + ", " +
                     std::to_string(n_longest) + " tokens: the key/value cache holds " +
                     std::to_string(positions) + " positions), or pass --skip-memory-check to "
                     "try anyway",
                 a->skip_memory_check);
    std::string out;
    int64_t total_tokens = 0;
    double total_log_prob = 0;
    for (size_t d = 0; d < docs.size(); ++d) {
      const DocScore s = score_document(model, ids[d]);
      total_tokens += s.predicted;
      total_log_prob += s.sum_log_prob;
      nlohmann::json j = {{"document", d}, {"tokens", s.predicted},
                          {"sum_log_prob", s.sum_log_prob}};
      if (s.predicted > 0) {
        j["loss"] = -s.sum_log_prob / double(s.predicted);
        j["ppl"] = std::exp(-s.sum_log_prob / double(s.predicted));
      }
      if (a->log_probs) {
        j["ids"] = ids[d];
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
    if (total_tokens == 0)  // not a loss of 0: there was nothing to predict
      std::fprintf(stderr, "score: %zu documents, no token scored (each has fewer than 2 "
                   "tokens)\n", docs.size());
    else
      std::fprintf(stderr, "score: %zu documents, %lld tokens scored, loss %.6f, ppl %.4f\n",
                   docs.size(), static_cast<long long>(total_tokens),
                   -total_log_prob / double(total_tokens),
                   std::exp(-total_log_prob / double(total_tokens)));
    return 0;
  };
}

}  // namespace mt
