// SentencePiece tokenizers through Debian's libsentencepiece, with Megatron-
// LM's semantics (megatron/training/tokenizer/tokenizer.py):
//
// SentencePieceTokenizer (`_SentencePieceTokenizer`, vocab_extra_ids = 0):
//   vocabulary = the model's pieces, then the special tokens "<CLS>", "<SEP>",
//   "<EOD>", "<MASK>", the pad, bos and eos pieces (each appended with the
//   next id unless the model already has it; a missing pad/bos/eos piece is
//   "<PAD>"/"<BOS>"/"<EOS>"). eod = id of "<EOD>". tokenize() cuts the text at
//   the earliest occurrence of any special token (ties: the one listed
//   first), encodes the pieces between with the model and emits the special
//   ids; detokenize() decodes runs of ordinary ids and writes each special
//   token as " <TOKEN> ".
// Llama2Tokenizer (`_Llama2Tokenizer`): vocabulary = the model's pieces;
//   tokenize(text) = [bos] + encode(text) (so even an empty text gives [bos]);
//   eod = eos; detokenize = the model's decode.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mt {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  enum class Flavor { kSentencePiece, kLlama2 };
  SentencePieceTokenizer(const std::string& model_file, Flavor flavor);
  ~SentencePieceTokenizer() override;

  std::string type() const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eod_; }
  int32_t bos() const override { return bos_; }
  int32_t eos() const { return eos_; }
  void tokenize_append(std::string_view text, std::vector<int32_t>& out) const override;
  std::string detokenize(std::span<const int32_t> ids) const override;
  nlohmann::json describe() const override;

  // The model's own encoding of `text` (no bos/eos, no special tokens).
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  // The special tokens and their ids, in Megatron's order (SentencePieceTokenizer only).
  const std::vector<std::pair<std::string, int32_t>>& special_tokens() const { return special_; }

 private:
  std::string decode_plain(std::span<const int32_t> ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  Flavor flavor_;
  std::string model_file_, model_sha256_;
  int64_t pieces_ = 0, vocab_size_ = 0;
  int32_t eod_ = -1, bos_ = -1, eos_ = -1;
  std::vector<std::pair<std::string, int32_t>> special_;  // (token, id), Megatron's order
};

}  // namespace mt
