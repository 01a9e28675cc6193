// The "decoder" stage of a Hugging Face tokenizer.json (token strings ->
// text, for `generate` and detokenize) and the "post_processor" stage (ids
// of the text -> the ids `tokenizer(text).input_ids` gives).
// Decoders built: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace
// (a String pattern), Sequence. Post-processors built: TemplateProcessing
// (the "single" template), ByteLevel (no change to ids), Sequence. Others
// (WordPiece / BPE / CTC decoders, RobertaProcessing, BertProcessing…) are
// refused by name.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mt {

struct HfDecoder {
  enum class Kind { kByteLevel, kMetaspace, kByteFallback, kFuse, kStrip, kReplace, kSequence };
  Kind kind = Kind::kSequence;
  std::string replacement;                 // Metaspace
  bool prepend = true;                     // Metaspace: prepend_scheme != never
  std::string content;                     // Strip: the character; Replace: the replacement
  size_t strip_start = 0, strip_stop = 0;  // Strip
  std::string pattern;                     // Replace
  std::vector<HfDecoder> children;         // Sequence
};

HfDecoder hf_decoder_from_json(const nlohmann::json& j, const std::string& where);
// Applies `d` to the token strings in place (tokenizers' decode_chain).
void hf_decode_chain(const HfDecoder& d, std::vector<std::string>& tokens);
// True when `d` is ByteLevel (alone or the only member of Sequences): a
// token's bytes are then its characters mapped through GPT-2's table.
bool hf_decoder_is_byte_level(const HfDecoder& d);

// A post-processor reduced to what it does to one sequence's ids: the ids
// before and after it.
struct HfPostProcessor {
  std::vector<int32_t> prefix, suffix;
};
HfPostProcessor hf_post_processor_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace mt
