#include "data/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/hf_text.h"
#include "data/sha256.h"
#include "data/utf8.h"

namespace mt {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MT_CHECK(in.good(), "cannot read ", path, "; fix: check --tokenizer-model (a folder with tokenizer.json)");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MT_FAIL(path, " is not valid JSON (", e.what(), "); fix: download the file again");
  }
}

// tokenizer_config's token fields: a string, {"content": ...} or null.
std::string token_content(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return "";
  const nlohmann::json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return "";
}

// transformers' clean_up_tokenization.
std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    const std::string f(from), t(to);
    std::string out;
    size_t at = 0;
    for (size_t hit; (hit = s.find(f, at)) != std::string::npos; at = hit + f.size()) {
      out.append(s, at, hit - at);
      out += t;
    }
    out.append(s, at, std::string::npos);
    s.swap(out);
  }
  return s;
}

}  // namespace

HuggingFaceTokenizer::HuggingFaceTokenizer(const std::string& path) {
  MT_CHECK(!path.empty(),
           "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model DIR; fix: "
           "pass the folder holding tokenizer.json (e.g. a Hugging Face model folder)");
  std::error_code ec;
  const bool is_file = fs::is_regular_file(path, ec);
  const fs::path dir = is_file ? fs::path(path).parent_path() : fs::path(path);
  json_path_ = is_file ? path : (dir / "tokenizer.json").string();
  MT_CHECK(fs::is_regular_file(json_path_, ec), "HuggingFaceTokenizer: ", json_path_,
           " not found; fix: "
           "pass --tokenizer-model a folder holding tokenizer.json (scripts/fetch_hf_tokenizers.sh "
           "fetches Qwen3's, Llama 3's and Gemma 3's)");
  const nlohmann::json j = read_json(json_path_);
  json_sha256_ = sha256_file_hex(json_path_);
  nlohmann::json config = nlohmann::json::object();
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec)) {
    config_path_ = (dir / "tokenizer_config.json").string();
    config = read_json(config_path_);
    config_sha256_ = sha256_file_hex(config_path_);
  }
  const std::string& w = json_path_;
  MT_CHECK(j.is_object() && j.contains("model"), w,
           " has no \"model\"; fix: pass a tokenizers "
           "tokenizer.json");
  if (j.contains("normalizer") && !j.at("normalizer").is_null()) {
    normalizer_ = hf_normalizer_from_json(j.at("normalizer"), w);
    has_normalizer_ = true;
  }
  if (j.contains("pre_tokenizer") && !j.at("pre_tokenizer").is_null()) {
    pre_tokenizer_ = hf_pre_tokenizer_from_json(j.at("pre_tokenizer"), w);
    has_pre_tokenizer_ = true;
  }
  model_ = HfBpe::from_json(j.at("model"), w);
  if (j.contains("post_processor")) post_ = hf_post_processor_from_json(j.at("post_processor"), w);
  if (j.contains("decoder") && !j.at("decoder").is_null()) {
    decoder_ = hf_decoder_from_json(j.at("decoder"), w);
    has_decoder_ = true;
    byte_level_decoder_ = hf_decoder_is_byte_level(decoder_);
  }
  added_ = hf_added_tokens_from_json(j.value("added_tokens", nlohmann::json()), w);
  raw_matcher_.build(added_, /*normalized=*/false);
  normalized_matcher_.build(added_, /*normalized=*/true);

  int64_t max_id = model_.max_id();
  for (const HfAddedToken& t : added_) max_id = std::max<int64_t>(max_id, t.id);
  vocab_size_ = max_id + 1;
  added_by_id_.assign(size_t(vocab_size_), std::string());
  for (const HfAddedToken& t : added_) added_by_id_[size_t(t.id)] = t.content;

  const std::string cw = config_path_.empty() ? w : config_path_;
  auto id_of = [&](const std::string& tok, const char* key) {
    const int32_t id = token_to_id(tok);
    MT_CHECK(id >= 0, cw, ": ", key, " \"", tok,
             "\" is neither an added token nor in the vocabulary "
             "of ",
             w, "; fix: use the tokenizer_config.json that came with this tokenizer.json");
    return id;
  };
  if (const std::string eos = token_content(config, "eos_token"); !eos.empty()) {
    eod_ = id_of(eos, "eos_token");
  } else {
    for (const char* name : {"</s>", "<|endoftext|>", "<eos>", "<|end_of_text|>"})
      if (eod_ < 0) eod_ = token_to_id(name);
  }
  if (const std::string bos = token_content(config, "bos_token"); !bos.empty())
    bos_ = id_of(bos, "bos_token");
  clean_up_spaces_ = config.value("clean_up_tokenization_spaces", false);

  // transformers' Llama/Gemma fast tokenizers rebuild the template from
  // add_bos_token / add_eos_token (update_post_processor).
  static const char* const kTemplated[] = {"LlamaTokenizer",     "LlamaTokenizerFast",
                                           "GemmaTokenizer",     "GemmaTokenizerFast",
                                           "CodeLlamaTokenizer", "CodeLlamaTokenizerFast"};
  const std::string cls = config.value("tokenizer_class", std::string());
  if (std::find(std::begin(kTemplated), std::end(kTemplated), cls) != std::end(kTemplated)) {
    const bool add_bos = config.value("add_bos_token", true), add_eos = config.value("add_eos_token", false);
    MT_CHECK(!add_bos || bos_ >= 0, cw, ": add_bos_token is true but there is no bos_token; fix: set one");
    MT_CHECK(!add_eos || eod_ >= 0, cw, ": add_eos_token is true but there is no eos_token; fix: set one");
    post_.prefix.clear();
    post_.suffix.clear();
    if (add_bos) post_.prefix.push_back(bos_);
    if (add_eos) post_.suffix.push_back(eod_);
  }
}

int32_t HuggingFaceTokenizer::token_to_id(std::string_view token) const {
  for (const HfAddedToken& t : added_)
    if (t.content == token) return t.id;
  auto it = model_.vocab().find(token);
  return it == model_.vocab().end() ? -1 : it->second;
}

const std::string& HuggingFaceTokenizer::id_to_token(int32_t id) const {
  if (id >= 0 && size_t(id) < added_by_id_.size() && !added_by_id_[size_t(id)].empty())
    return added_by_id_[size_t(id)];
  return model_.id_to_token(id);
}

void HuggingFaceTokenizer::encode_normalized_piece(std::string_view text, bool at_start,
                                                   std::vector<int32_t>& out) const {
  thread_local std::vector<HfPiece> pieces;
  pieces.clear();
  pieces.push_back({std::string(text), at_start});
  if (has_pre_tokenizer_) hf_pre_tokenize(pre_tokenizer_, pieces);
  for (const HfPiece& p : pieces) model_.encode(p.text, out);
}

void HuggingFaceTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  const size_t bad = utf8_first_invalid(text);
  MT_CHECK(bad == text.size(), "invalid UTF-8 at byte offset ", bad,
           "; fix: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
  std::vector<HfAddedMatcher::Cut> raw, norm;
  raw_matcher_.split(text, raw);
  for (const HfAddedMatcher::Cut& c : raw) {
    if (c.token >= 0) {
      out.push_back(raw_matcher_.token(c.token).id);
      continue;
    }
    std::string piece(text.substr(c.begin, c.end - c.begin));
    if (has_normalizer_) piece = hf_normalize(normalizer_, std::move(piece));
    norm.clear();
    normalized_matcher_.split(piece, norm);
    for (const HfAddedMatcher::Cut& n : norm) {
      if (n.token >= 0)
        out.push_back(normalized_matcher_.token(n.token).id);
      else
        encode_normalized_piece(std::string_view(piece).substr(n.begin, n.end - n.begin),
                                c.begin == 0 && n.begin == 0, out);
    }
  }
}

void HuggingFaceTokenizer::tokenize_append(std::string_view text, std::vector<int32_t>& out) const {
  out.insert(out.end(), post_.prefix.begin(), post_.prefix.end());
  encode_plain(text, out);
  out.insert(out.end(), post_.suffix.begin(), post_.suffix.end());
}

std::string HuggingFaceTokenizer::decode_raw(std::span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& t = id_to_token(ids[i]);
    MT_CHECK(!t.empty(), "token id ", ids[i], " at position ", i, " is not in the HuggingFaceTokenizer ",
             json_path_, " (vocabulary size ", vocab_size_,
             "); fix: decode with the tokenizer the ids "
             "were made with");
    tokens.push_back(t);
  }
  if (!has_decoder_) {
    std::string s;
    for (size_t i = 0; i < tokens.size(); ++i) s += (i ? " " : "") + tokens[i];
    return s;
  }
  hf_decode_chain(decoder_, tokens);
  std::string s;
  for (const std::string& t : tokens) s += t;
  return s;
}

std::string HuggingFaceTokenizer::detokenize(std::span<const int32_t> ids) const {
  std::string s = decode_raw(ids);
  return clean_up_spaces_ ? clean_up_tokenization(std::move(s)) : s;
}

bool HuggingFaceTokenizer::append_token_bytes(int32_t id, std::string& out) const {
  if (!byte_level_decoder_) return false;
  const std::string& t = id_to_token(id);
  MT_CHECK(!t.empty(), "token id ", id, " is not in the HuggingFaceTokenizer ", json_path_,
           " (vocabulary size ", vocab_size_, ")");
  std::string bytes;
  for (size_t i = 0, len = 0; i < t.size(); i += len) {
    const int b = hf_char_to_byte(hf_char_at(t, i, len));
    if (b < 0) {
      out += t;  // a token outside the byte table keeps its UTF-8 (tokenizers' ByteLevel decoder)
      return true;
    }
    bytes += char(b);
  }
  out += bytes;
  return true;
}

nlohmann::json HuggingFaceTokenizer::describe() const {
  nlohmann::json j = Tokenizer::describe();
  j["tokenizer_json"] = {{"path", json_path_}, {"sha256", json_sha256_}};
  if (!config_path_.empty()) j["tokenizer_config"] = {{"path", config_path_}, {"sha256", config_sha256_}};
  return j;
}

}  // namespace mt
