#include "checkpoint/checkpoint_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "core/error.h"
#include "data/char_tokenizer.h"
#include "data/sha256.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

// The file-valued keys of a record and the name of each file's copy.
const std::vector<std::pair<std::string, std::string>>& file_roles() {
  static const std::vector<std::pair<std::string, std::string>> kRoles = {
      {"vocab_file", "vocab.json"}, {"merge_file", "merges.txt"},
      {"tokenizer_model", "tokenizer.model"},
      // HuggingFaceTokenizer: its folder's two files (the copies make a folder
      // that is its --tokenizer-model).
      {"tokenizer_json", "tokenizer.json"}, {"tokenizer_config", "tokenizer_config.json"}};
  return kRoles;
}

// The record without paths: what identifies the tokenizer (a char record by
// its vocabulary, with or without the checksum that records saved since carry).
nlohmann::json identity(nlohmann::json r) {
  for (const auto& [role, name] : file_roles())
    if (r.contains(role) && r.at(role).is_object()) r[role] = r.at(role).value("sha256", "");
  r.erase("vocab_sha256");
  return r;
}

// role -> SHA-256 of the files a record names (a char record: its vocabulary
// as the "vocab_file" that preprocess writes).
std::vector<std::pair<std::string, std::string>> file_checksums(const nlohmann::json& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [role, name] : file_roles())
    if (r.contains(role) && r.at(role).is_object()) out.emplace_back(role, r.at(role).value("sha256", ""));
  if (r.contains("vocab_sha256") && r.at("vocab_sha256").is_string())
    out.emplace_back("vocab_file", r.at("vocab_sha256").get<std::string>());
  return out;
}

std::string copy_path(const std::string& iter_dir, const std::string& name) {
  return iter_dir + "/tokenizer/" + name;
}

// Throws unless `path` exists and hashes to what `record` says of `role`.
void check_hash(const nlohmann::json& record, const std::string& role, const std::string& path) {
  std::error_code ec;
  MT_CHECK(fs::is_regular_file(path, ec), "tokenizer file ", path, " (", role,
           ") is missing; fix: restore it, or pass the tokenizer flags of the run");
  const std::string want = record.at(role).value("sha256", "");
  const std::string got = sha256_file_hex(path);
  MT_CHECK(got == want, "tokenizer file ", path, " has SHA-256 ", got, " but the run recorded ",
           want, " for its ", role, "; the file changed; fix: restore the file the run used");
}

}  // namespace

// <prefix>_tokenizer.json for --data-path <prefix>_<key>_document ("" when
// there is none; a key may hold '_', so the longest prefix that has one wins).
std::string dataset_record_path(const std::string& data_prefix) {
  static constexpr std::string_view kSuffix = "_document";
  if (data_prefix.size() <= kSuffix.size() ||
      data_prefix.compare(data_prefix.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return "";
  const std::string stem = data_prefix.substr(0, data_prefix.size() - kSuffix.size());
  const size_t dir_end = stem.rfind('/') == std::string::npos ? 0 : stem.rfind('/') + 1;
  std::error_code ec;
  for (size_t p = stem.rfind('_'); p != std::string::npos && p > dir_end; p = stem.rfind('_', p - 1)) {
    const std::string path = stem.substr(0, p) + "_tokenizer.json";
    if (fs::is_regular_file(path, ec)) return path;
  }
  return "";
}

nlohmann::json char_tokenizer_record(const CharTokenizer& vocab) {
  const std::string text = vocab.to_json();
  return {{"type", "char"}, {"vocab", nlohmann::json::parse(text)}, {"vocab_sha256", sha256_hex(text)}};
}

CharTokenizer char_vocab_of(const nlohmann::json& record, const std::string& where) {
  MT_CHECK(record.contains("vocab"), where, " has no 'args.tokenizer.vocab'; the file is damaged");
  CharTokenizer vocab = CharTokenizer::from_json(record.at("vocab").dump(), where);
  if (!record.contains("vocab_sha256")) return vocab;  // saved before checksums were recorded
  const nlohmann::json& want = record.at("vocab_sha256");
  const std::string got = sha256_hex(vocab.to_json());
  MT_CHECK(want.is_string() && want.get<std::string>() == got, where,
           ": the character vocabulary in args.tokenizer.vocab (", vocab.vocab_size(),
           " entries) has SHA-256 ", got, " but the run recorded ",
           want.is_string() ? want.get<std::string>() : want.dump(),
           " (args.tokenizer.vocab_sha256); it was edited, and the weights' ids would mean other "
           "text; fix: restore that vocabulary (the run's <prefix>_vocab.json, whose sha256sum is "
           "the recorded one)");
  return vocab;
}

nlohmann::json tokenizer_record(const Tokenizer& tok, const TokenizerOptions& options) {
  if (tok.type() == "char") return char_tokenizer_record(CharTokenizer::load(options.vocab_file));
  if (tok.type() == "NullTokenizer")
    return {{"type", "NullTokenizer"}, {"vocab_size", options.vocab_size}};
  return tok.describe();
}

bool same_tokenizer(const nlohmann::json& a, const nlohmann::json& b) {
  return identity(a) == identity(b);
}

std::string tokenizer_file_list(const nlohmann::json& record) {
  std::string s;
  for (const auto& [role, name] : file_roles())
    if (record.contains(role)) s += (s.empty() ? "" : ", ") + name;
  return s;
}

void save_tokenizer_files(const nlohmann::json& record, const std::string& iter_dir) {
  for (const auto& [role, name] : file_roles()) {
    if (!record.contains(role) || !record.at(role).is_object()) continue;
    const std::string from = record.at(role).value("path", "");
    check_hash(record, role, from);
    std::error_code ec;
    fs::create_directories(iter_dir + "/tokenizer", ec);
    fs::copy_file(from, copy_path(iter_dir, name), fs::copy_options::overwrite_existing, ec);
    MT_CHECK(!ec, "cannot copy the tokenizer file ", from, " into ", iter_dir, "/tokenizer: ",
             ec.message(), "; fix: check free space at --save");
  }
}

nlohmann::json adopt_tokenizer_record(const nlohmann::json& record, const std::string& iter_dir) {
  nlohmann::json r = record;
  for (const auto& [role, name] : file_roles()) {
    if (!r.contains(role) || !r.at(role).is_object()) continue;
    check_hash(r, role, copy_path(iter_dir, name));
    r[role]["path"] = copy_path(iter_dir, name);
  }
  return r;
}

std::unique_ptr<Tokenizer> tokenizer_from_record(const nlohmann::json& record,
                                                 const std::string& iter_dir) {
  const std::string type = record.value("type", "");
  if (type == "char") return make_char_tokenizer(char_vocab_of(record, iter_dir + "/meta.json"));
  TokenizerOptions o;
  o.type = type;
  o.vocab_size = record.value("vocab_size", int64_t(0));
  if (type != "NullTokenizer") {
    const nlohmann::json r = adopt_tokenizer_record(record, iter_dir);
    auto path = [&](const char* role) {
      return r.contains(role) ? r.at(role).value("path", "") : std::string();
    };
    o.vocab_file = path("vocab_file");
    o.merge_file = path("merge_file");
    o.tokenizer_model = path("tokenizer_model");
    if (type == "HuggingFaceTokenizer") o.tokenizer_model = fs::path(path("tokenizer_json")).parent_path().string();
  }
  std::unique_ptr<Tokenizer> tok = make_tokenizer(o);
  MT_CHECK(type == "NullTokenizer" || tok->vocab_size() == record.value("vocab_size", int64_t(-1)),
           "checkpoint ", iter_dir, ": its ", type, " has ", tok->vocab_size(),
           " entries but the run recorded ", record.value("vocab_size", int64_t(-1)));
  return tok;
}

void check_dataset_tokenizer(const std::string& data_prefix, const nlohmann::json& record,
                             const std::string& vocab_file) {
  const std::string path = dataset_record_path(data_prefix);
  if (path.empty()) return;
  nlohmann::json made;
  try {
    made = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL(path, " (the tokenizer record of --data-path ", data_prefix, ") is not valid JSON (",
            e.what(), "); fix: preprocess the data again, or remove the file to skip this check");
  }
  if (!made.is_object() || made.value("type", "") != record.value("type", "")) return;
  for (const auto& [role, want] : file_checksums(made))
    for (const auto& [run_role, got] : file_checksums(record)) {
      if (run_role != role || got == want) continue;
      const std::string file = made.contains(role) && made.at(role).is_object()
                                   ? made.at(role).value("path", "") : "";
      std::string ours = record.contains(role) && record.at(role).is_object()
                             ? record.at(role).value("path", "") : vocab_file;
      if (ours.empty()) ours = "the checkpoint's vocabulary";
      std::string flag = "--" + role;
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (role == "tokenizer_json" || role == "tokenizer_config") flag = "--tokenizer-model's";
      MT_FAIL("--data-path ", data_prefix, " was made with the ", record.value("type", ""), " ",
              flag, " ", file, " of SHA-256 ", want, " (recorded in ", path, ") but this run's ",
              flag, " ", ours, " has SHA-256 ", got, "; the contents differ, and the dataset's "
              "ids would mean other text; fix: use the file the dataset was made with, or "
              "preprocess the data again with this one");
    }
}

namespace {

// "GPT2BPETokenizer (50257 ids; vocab_file sha256 3c7e…, merge_file sha256 1ce1…)".
std::string describe_record(const nlohmann::json& r) {
  std::string s = r.value("type", std::string("?"));
  s += " (";
  if (r.contains("vocab_size") && r.at("vocab_size").is_number_integer())
    s += std::to_string(r.at("vocab_size").get<int64_t>()) + " ids";
  for (const auto& [role, sum] : file_checksums(r))
    s += (s.back() == '(' ? "" : "; ") + role + " SHA-256 " + sum.substr(0, 12);
  return s + ")";
}

// The preprocess flags that make a record's tokenizer: "--tokenizer-type
// GPT2BPETokenizer --vocab-file V --merge-file M".
std::string preprocess_flags(const nlohmann::json& r) {
  std::string s = "--tokenizer-type " + r.value("type", std::string("?"));
  for (const auto& [role, name] : file_roles()) {
    if (!r.contains(role) || !r.at(role).is_object()) continue;
    std::string flag = "--" + role;
    std::replace(flag.begin(), flag.end(), '_', '-');
    s += " " + flag + " " + r.at(role).value("path", std::string("?"));
  }
  if (r.value("type", "") == "NullTokenizer" && r.contains("vocab_size"))
    s += " --vocab-size " + r.at("vocab_size").dump();
  return s;
}

}  // namespace

std::string check_blend_tokenizers(const std::vector<std::string>& prefixes) {
  if (prefixes.size() < 2) return "";
  std::string first, first_path, without;
  nlohmann::json first_record;
  for (const std::string& prefix : prefixes) {
    const std::string path = dataset_record_path(prefix);
    if (path.empty()) {
      without += (without.empty() ? "" : ", ") + prefix;
      continue;
    }
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(read_text_file(path));
    } catch (const nlohmann::json::exception& e) {
      MT_FAIL(path, " (the tokenizer record of dataset ", prefix, ") is not valid JSON (",
              e.what(), "); fix: preprocess the data again, or remove the file to skip this check");
    }
    if (first.empty()) {
      first = prefix;
      first_path = path;
      first_record = r;
      continue;
    }
    MT_CHECK(same_tokenizer(first_record, r), "the run's datasets were preprocessed with different "
             "tokenizers: ", first, " with ", describe_record(first_record), " (", first_path,
             ") but ", prefix, " with ", describe_record(r), " (", path, "); the same id would "
             "mean other text in each; fix: preprocess ", prefix, "'s text again with ", first,
             "'s tokenizer (megatron preprocess --input ... --output-prefix ... ",
             preprocess_flags(first_record), "), or train on datasets of one tokenizer");
  }
  if (first.empty() || without.empty()) return "";
  return "dataset(s) " + without + " have no tokenizer record (<prefix>_tokenizer.json, written "
         "by megatron preprocess) while " + first + " has one (" + describe_record(first_record) +
         "): they are blended unchecked; make sure they were preprocessed with that tokenizer, "
         "or preprocess them again with megatron preprocess";
}

}  // namespace mt
