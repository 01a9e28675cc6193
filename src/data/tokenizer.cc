#include "data/tokenizer.h"

#include <utility>

#include "core/error.h"
#include "data/char_tokenizer.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/sha256.h"
#include "data/utf8.h"

namespace mt {

namespace {

// --tokenizer-type char: the character vocabulary <prefix>_vocab.json.
class CharTokenizerAdapter final : public Tokenizer {
 public:
  // The SHA-256 is that of the vocabulary's JSON as preprocess writes it
  // (CharTokenizer::to_json), so `sha256sum <prefix>_vocab.json` prints it and
  // a re-formatted copy of the same vocabulary has it too.
  explicit CharTokenizerAdapter(const std::string& vocab_file)
      : tok_(CharTokenizer::load(vocab_file)), path_(vocab_file), sha256_(sha256_hex(tok_.to_json())) {}
  // A vocabulary that lives in a checkpoint's meta.json, not in a file.
  explicit CharTokenizerAdapter(CharTokenizer tok)
      : tok_(std::move(tok)), sha256_(sha256_hex(tok_.to_json())) {}
  std::string type() const override { return "char"; }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  int32_t eod() const override { return tok_.eod(); }
  void tokenize_append(std::string_view text, std::vector<int32_t>& out) const override {
    tok_.tokenize_append(text, out);
  }
  std::string detokenize(std::span<const int32_t> ids) const override { return tok_.detokenize(ids); }
  nlohmann::json describe() const override {
    nlohmann::json j = Tokenizer::describe();
    j["vocab_file"] = {{"path", path_}, {"sha256", sha256_}};
    return j;
  }

 private:
  CharTokenizer tok_;
  std::string path_, sha256_;
};

class NullTokenizerAdapter final : public Tokenizer {
 public:
  explicit NullTokenizerAdapter(int64_t vocab_size) : tok_(vocab_size) {}
  std::string type() const override { return "NullTokenizer"; }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  int32_t eod() const override { return tok_.eod(); }
  void tokenize_append(std::string_view text, std::vector<int32_t>& out) const override {
    const std::vector<int32_t> ids = tok_.tokenize(text);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  std::string detokenize(std::span<const int32_t> ids) const override { return tok_.detokenize(ids); }

 private:
  NullTokenizer tok_;
};

}  // namespace

std::vector<int32_t> Tokenizer::tokenize(std::string_view text) const {
  std::vector<int32_t> ids;
  tokenize_append(text, ids);
  return ids;
}

nlohmann::json Tokenizer::describe() const {
  return {{"type", type()}, {"vocab_size", vocab_size()}, {"eod", eod()}, {"bos", bos()}};
}

const std::vector<std::string>& tokenizer_types() {
  static const std::vector<std::string> kTypes = {"char", "NullTokenizer", "GPT2BPETokenizer",
                                                  "SentencePieceTokenizer", "Llama2Tokenizer",
                                                  "HuggingFaceTokenizer"};
  return kTypes;
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& o) {
  if (o.type == "char") {
    MT_CHECK(!o.vocab_file.empty(), "--tokenizer-type char needs --vocab-file (the "
             "<prefix>_vocab.json written by `megatron preprocess`)");
    return std::make_unique<CharTokenizerAdapter>(o.vocab_file);
  }
  if (o.type == "NullTokenizer") {
    MT_CHECK(o.vocab_size > 0, "--tokenizer-type NullTokenizer needs --vocab-size N (ids are in "
             "[0, N), eod is N)");
    return std::make_unique<NullTokenizerAdapter>(o.vocab_size);
  }
  if (o.type == "GPT2BPETokenizer")
    return std::make_unique<Gpt2BpeTokenizer>(Gpt2BpeTokenizer::load(o.vocab_file, o.merge_file));
  if (o.type == "SentencePieceTokenizer")
    return std::make_unique<SentencePieceTokenizer>(o.tokenizer_model,
                                                    SentencePieceTokenizer::Flavor::kSentencePiece);
  if (o.type == "Llama2Tokenizer")
    return std::make_unique<SentencePieceTokenizer>(o.tokenizer_model,
                                                    SentencePieceTokenizer::Flavor::kLlama2);
  if (o.type == "HuggingFaceTokenizer") return std::make_unique<HuggingFaceTokenizer>(o.tokenizer_model);
  std::string known;
  for (const std::string& t : tokenizer_types()) known += (known.empty() ? "" : ", ") + t;
  MT_FAIL("unknown --tokenizer-type '", o.type, "'; fix: use one of ", known);
}

std::unique_ptr<Tokenizer> make_char_tokenizer(CharTokenizer tok) {
  return std::make_unique<CharTokenizerAdapter>(std::move(tok));
}

// ------------------------------------------------------ StreamingDetokenizer

std::string StreamingDetokenizer::push(int32_t id) {
  std::string out;
  if (ids_.empty() && tok_.append_token_bytes(id, pending_)) {
    // Byte-level: decode what is complete, keep a character's first bytes.
    pending_.erase(0, utf8_decode_replace(pending_, out, /*final=*/false));
    return out;
  }
  // Others: decode everything again and return what is new, holding back a
  // trailing U+FFFD (a byte-fallback character may still be incomplete).
  ids_.push_back(id);
  std::string text = tok_.detokenize(ids_);
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t end = text.size();
  while (end >= 3 && std::string_view(text).substr(end - 3, 3) == kReplacement) end -= 3;
  if (end <= emitted_.size() || text.compare(0, emitted_.size(), emitted_) != 0) return out;
  out = text.substr(emitted_.size(), end - emitted_.size());
  emitted_ += out;
  return out;
}

std::string StreamingDetokenizer::finish() {
  std::string out;
  if (!pending_.empty()) {
    utf8_decode_replace(pending_, out, /*final=*/true);
    pending_.clear();
    return out;
  }
  if (ids_.empty()) return out;
  const std::string text = tok_.detokenize(ids_);
  if (text.size() > emitted_.size() && text.compare(0, emitted_.size(), emitted_) == 0)
    out = text.substr(emitted_.size());
  emitted_ += out;
  return out;
}

}  // namespace mt
