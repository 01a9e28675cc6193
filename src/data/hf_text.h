// Small Unicode helpers shared by the Hugging Face tokenizer stages
// (hf_normalizers, hf_pretokenizers, hf_added_tokens, hf_bpe, hf_decoders):
// stepping through UTF-8, the character classes Rust's `char` methods give
// (is_whitespace, is_alphanumeric, is_numeric, punctuation) from utf8proc's
// tables, and GPT-2's byte <-> character table of the ByteLevel stages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mt {

// Decodes the (valid) UTF-8 character at s[i]; sets `len` to its byte length.
char32_t hf_char_at(std::string_view s, size_t i, size_t& len);
// Byte length of the UTF-8 character whose first byte is `lead`.
inline size_t hf_char_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Rust's char::is_whitespace (Unicode White_Space).
bool hf_is_whitespace(char32_t cp);
// Rust's char::is_alphanumeric (letters L*, numbers N*).
bool hf_is_alphanumeric(char32_t cp);
// Rust's char::is_numeric (Nd, Nl, No).
bool hf_is_numeric(char32_t cp);
// tokenizers' is_punc: ASCII punctuation or categories Pc Pd Pe Pf Pi Po Ps.
bool hf_is_punctuation(char32_t cp);

// GPT-2's bytes_to_unicode(): the character standing for byte `b`, and the
// byte a character stands for (-1 when it stands for none).
char32_t hf_byte_to_char(uint8_t b);
int hf_char_to_byte(char32_t cp);
// The UTF-8 of hf_byte_to_char(b), precomputed.
const std::string& hf_byte_char_utf8(uint8_t b);

}  // namespace mt
