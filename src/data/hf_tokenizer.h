// --tokenizer-type HuggingFaceTokenizer --tokenizer-model DIR: a Hugging Face
// `tokenizers` tokenizer.json (DIR/tokenizer.json, plus DIR/tokenizer_config.json
// when present), giving the ids of transformers' `tokenizer(text).input_ids`
// (Megatron-LM's _HuggingFaceTokenizer.tokenize). The pipeline, one stage per
// file:
//   added tokens (hf_added_tokens) -> normalizer (hf_normalizers) ->
//   pre-tokenizer (hf_pretokenizers) -> model (hf_bpe) -> post-processor
//   (hf_decoders: TemplateProcessing) ; decode: decoder (hf_decoders).
// tokenizer_config.json: eos_token is eod (else the first of </s>,
// <|endoftext|>, <eos>, <|end_of_text|> that is an added token), bos_token is
// bos; for tokenizer_class Llama/Gemma/CodeLlama tokenizers, add_bos_token
// (default true) and add_eos_token (default false) replace the file's
// post-processor, as transformers' LlamaTokenizerFast.update_post_processor;
// clean_up_tokenization_spaces applies transformers' clean-up in detokenize
// (not to the raw bytes append_token_bytes gives a stream: printed text
// cannot be taken back, so `generate` prints the decoder's own text).
// vocab_size = 1 + the largest id of the model's vocabulary and the added tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/hf_added_tokens.h"
#include "data/hf_bpe.h"
#include "data/hf_decoders.h"
#include "data/hf_normalizers.h"
#include "data/hf_pretokenizers.h"
#include "data/tokenizer.h"

namespace mt {

class HuggingFaceTokenizer final : public Tokenizer {
 public:
  // `path`: the folder holding tokenizer.json (or the tokenizer.json itself).
  explicit HuggingFaceTokenizer(const std::string& path);

  std::string type() const override { return "HuggingFaceTokenizer"; }
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eod_; }
  int32_t bos() const override { return bos_; }
  void tokenize_append(std::string_view text, std::vector<int32_t>& out) const override;
  std::string detokenize(std::span<const int32_t> ids) const override;
  bool append_token_bytes(int32_t id, std::string& out) const override;
  nlohmann::json describe() const override;

  // The ids without the post-processor (no bos / template tokens).
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  // The decoder's text without transformers' clean-up of spaces.
  std::string decode_raw(std::span<const int32_t> ids) const;
  // Id of a token string (added tokens first, then the model), -1 if none.
  int32_t token_to_id(std::string_view token) const;
  const std::string& id_to_token(int32_t id) const;

 private:
  void encode_normalized_piece(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

  std::string json_path_, config_path_, json_sha256_, config_sha256_;
  bool has_normalizer_ = false, has_pre_tokenizer_ = false, has_decoder_ = false;
  HfNormalizer normalizer_;
  HfPreTokenizer pre_tokenizer_;
  HfBpe model_;
  HfPostProcessor post_;
  HfDecoder decoder_;
  bool byte_level_decoder_ = false, clean_up_spaces_ = false;  // (see above)
  std::vector<HfAddedToken> added_;
  HfAddedMatcher raw_matcher_, normalized_matcher_;  // normalized = false / true
  std::vector<std::string> added_by_id_;             // id -> content ("" if not added)
  int64_t vocab_size_ = 0;
  int32_t eod_ = -1, bos_ = -1;
};

}  // namespace mt
