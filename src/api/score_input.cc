#include "api/score_input.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_kind.h"
#include "data/preprocess_pipeline.h"

namespace mt {

namespace {

bool is_jsonl(const std::string& path) {
  return path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
}

// The documents of a .txt or .jsonl stream, in order; *bytes: how many it read.
std::vector<std::string> read_document_stream(const std::string& path, const std::string& json_key,
                                              std::istream& in, int64_t* bytes) {
  std::vector<std::string> docs;
  *bytes = 0;
  if (!is_jsonl(path)) {
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
    MT_CHECK(!j.is_discarded() && j.is_object() && j.contains(json_key) &&
                 j.at(json_key).is_string(),
             path, " line ", n, " is not a JSON object with a string \"", json_key,
             "\"; fix: one object per line, or name the key with --json-keys");
    docs.push_back(j.at(json_key).get<std::string>());
  }
  return docs;
}

}  // namespace

std::vector<std::string> read_score_documents(const std::string& path,
                                              const std::string& json_key) {
  struct stat st {};
  MT_CHECK(::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), "--input ", path,
           " is ", file_kind(st.st_mode), "; fix: give a .txt or .jsonl file");
  std::ifstream in(path, std::ios::binary);
  MT_CHECK(in.good(), "cannot open --input ", path, "; fix: give an existing .txt or .jsonl file");
  int64_t bytes = 0;
  std::vector<std::string> docs = read_document_stream(path, json_key, in, &bytes);
  MT_CHECK(!in.bad(), "cannot read --input ", path, "; fix: give a readable file");
  // .txt: "\n\n \n\n\n" splits (as preprocess splits) into " " and "\n", blank lines all
  const bool blank = std::all_of(docs.begin(), docs.end(), [](const std::string& d) {
    return d.find_first_not_of(" \t\r\n") == std::string::npos;
  });
  MT_CHECK(!docs.empty() && (is_jsonl(path) || !blank), "--input ", path,
           bytes == 0 ? " is empty" : " has only blank lines",
           ": no document to score; fix: give text (.txt: documents separated by blank lines; "
           ".jsonl: one {\"", json_key, "\": \"...\"} object per line)");
  return docs;
}

}  // namespace mt
