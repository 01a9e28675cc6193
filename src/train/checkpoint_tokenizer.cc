#include "train/checkpoint_tokenizer.h"

#include <filesystem>
#include <utility>
#include <vector>

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
      {"tokenizer_model", "tokenizer.model"}};
  return kRoles;
}

// The record without paths: what identifies the tokenizer.
nlohmann::json identity(nlohmann::json r) {
  for (const auto& [role, name] : file_roles())
    if (r.contains(role) && r.at(role).is_object()) r[role] = r.at(role).value("sha256", "");
  return r;
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

nlohmann::json tokenizer_record(const Tokenizer& tok, const TokenizerOptions& options) {
  if (tok.type() == "char")
    return {{"type", "char"},
            {"vocab", nlohmann::json::parse(CharTokenizer::load(options.vocab_file).to_json())}};
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
  if (type == "char") {
    MT_CHECK(record.contains("vocab"), "checkpoint ", iter_dir, ": its meta.json has no "
             "'args.tokenizer.vocab'; the file is damaged");
    return make_char_tokenizer(CharTokenizer::from_json(record.at("vocab").dump(), iter_dir));
  }
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
  }
  std::unique_ptr<Tokenizer> tok = make_tokenizer(o);
  MT_CHECK(type == "NullTokenizer" || tok->vocab_size() == record.value("vocab_size", int64_t(-1)),
           "checkpoint ", iter_dir, ": its ", type, " has ", tok->vocab_size(),
           " entries but the run recorded ", record.value("vocab_size", int64_t(-1)));
  return tok;
}

}  // namespace mt
