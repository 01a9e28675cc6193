#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/sha256.h"
#include "data/utf8.h"

namespace mt {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file, Flavor flavor)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), flavor_(flavor),
      model_file_(model_file) {
  MT_CHECK(!model_file.empty(), type(), " needs --tokenizer-model; fix: pass the SentencePiece "
           ".model file (e.g. tokenizer.model)");
  MT_CHECK(std::filesystem::is_regular_file(model_file), "cannot open --tokenizer-model ",
           model_file, "; fix: check the path of the SentencePiece .model file");
  const auto status = sp_->Load(model_file);
  MT_CHECK(status.ok(), "cannot load SentencePiece model ", model_file, ": ", status.ToString(),
           "; fix: pass a .model file written by spm_train / SentencePiece");
  model_sha256_ = sha256_file_hex(model_file);
  pieces_ = sp_->GetPieceSize();
  auto piece_or = [&](int id, const char* fallback) {
    return (id >= 0 && id < pieces_) ? sp_->IdToPiece(id) : std::string(fallback);
  };
  if (flavor_ == Flavor::kLlama2) {
    vocab_size_ = pieces_;
    bos_ = sp_->bos_id();
    eos_ = sp_->eos_id();
    eod_ = eos_;
    MT_CHECK(bos_ >= 0 && bos_ < pieces_ && eos_ >= 0 && eos_ < pieces_, "Llama2Tokenizer: model ",
             model_file, " has bos id ", bos_, " and eos id ", eos_, " (", pieces_,
             " pieces); a document is [bos] + text and eod is eos, so both must exist; fix: train "
             "with --bos_id and --eos_id set, or use --tokenizer-type SentencePieceTokenizer");
    return;
  }
  // Megatron's _initalize: append each special token unless it is a piece.
  vocab_size_ = pieces_;
  auto add_special = [&](const std::string& t) -> int32_t {
    for (const auto& [tok, id] : special_)
      if (tok == t) return id;
    int32_t id = sp_->PieceToId(t);
    // PieceToId returns unk for unknown pieces: only an exact match counts.
    if (!(id >= 0 && id < pieces_ && sp_->IdToPiece(id) == t)) id = int32_t(vocab_size_++);
    special_.emplace_back(t, id);
    return id;
  };
  add_special("<CLS>");
  add_special("<SEP>");
  eod_ = add_special("<EOD>");
  add_special("<MASK>");
  add_special(piece_or(sp_->pad_id(), "<PAD>"));
  bos_ = add_special(piece_or(sp_->bos_id(), "<BOS>"));
  eos_ = add_special(piece_or(sp_->eos_id(), "<EOS>"));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::string SentencePieceTokenizer::type() const {
  return flavor_ == Flavor::kLlama2 ? "Llama2Tokenizer" : "SentencePieceTokenizer";
}

void SentencePieceTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  const size_t bad = utf8_first_invalid(text);
  MT_CHECK(bad == text.size(), "invalid UTF-8 at byte offset ", bad,
           "; fix: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  MT_CHECK(status.ok(), "SentencePiece encode failed: ", status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

void SentencePieceTokenizer::tokenize_append(std::string_view text, std::vector<int32_t>& out) const {
  if (flavor_ == Flavor::kLlama2) {
    out.push_back(bos_);
    encode_plain(text, out);
    return;
  }
  size_t idx = 0;
  for (;;) {
    size_t best = std::string_view::npos;
    const std::pair<std::string, int32_t>* next = nullptr;
    for (const auto& st : special_) {  // earliest match; ties go to the first listed
      const size_t at = text.find(st.first, idx);
      if (at != std::string_view::npos && at < best) {
        best = at;
        next = &st;
      }
    }
    if (next == nullptr) break;
    encode_plain(text.substr(idx, best - idx), out);
    out.push_back(next->second);
    idx = best + next->first.size();
  }
  encode_plain(text.substr(idx), out);
}

std::string SentencePieceTokenizer::decode_plain(std::span<const int32_t> ids) const {
  std::vector<int> v(ids.begin(), ids.end());
  for (size_t i = 0; i < v.size(); ++i)
    MT_CHECK(v[i] >= 0 && v[i] < pieces_, "token id ", v[i], " at position ", i,
             " is outside the vocabulary of size ", vocab_size_,
             "; fix: decode with the tokenizer the ids were made with");
  std::string text;
  const auto status = sp_->Decode(v, &text);
  MT_CHECK(status.ok(), "SentencePiece decode failed: ", status.ToString());
  return text;
}

std::string SentencePieceTokenizer::detokenize(std::span<const int32_t> ids) const {
  if (flavor_ == Flavor::kLlama2) return decode_plain(ids);
  std::string text;
  size_t last = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    // Megatron's _inv_special_tokens: every special id, including bos/eos pieces.
    auto it = std::find_if(special_.begin(), special_.end(),
                           [&](const auto& st) { return st.second == ids[i]; });
    if (it == special_.end()) continue;
    text += decode_plain(ids.subspan(last, i - last)) + " ";
    text += it->first + " ";
    last = i + 1;
  }
  text += decode_plain(ids.subspan(last));
  return text;
}

nlohmann::json SentencePieceTokenizer::describe() const {
  nlohmann::json j = Tokenizer::describe();
  j["tokenizer_model"] = {{"path", model_file_}, {"sha256", model_sha256_}};
  return j;
}

}  // namespace mt
