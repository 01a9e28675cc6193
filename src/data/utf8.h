// UTF-8 helpers for the byte-level tokenizers (the strict decoder used by the
// character tokenizer lives in char_tokenizer.h).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mt {

// Byte offset of the first byte that does not start a valid, complete UTF-8
// sequence (strict: no overlongs, surrogates or values past U+10FFFF), or
// text.size() when all of `text` is valid.
size_t utf8_first_invalid(std::string_view text);

// Decodes `bytes` as Python's bytes.decode("utf-8", errors="replace") does and
// appends the (valid UTF-8) result to `out`: every maximal ill-formed
// subsequence becomes one U+FFFD (an invalid lead byte alone; a valid lead
// plus its valid continuation bytes when the next byte breaks the sequence or
// the data ends), as CPython and the Unicode standard's "maximal subpart"
// practice do. With final = false a trailing sequence that is valid so far but
// incomplete is not decoded; the return value is the number of bytes
// consumed (always bytes.size() when final), so a stream decoded chunk by
// chunk gives the same text as decoding it whole.
size_t utf8_decode_replace(std::string_view bytes, std::string& out, bool final = true);

}  // namespace mt
