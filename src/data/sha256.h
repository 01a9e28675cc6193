// SHA-256 (FIPS 180-4), for recording which tokenizer files a dataset or a
// checkpoint was made with (`sha256sum` prints the same hex digest).
#pragma once
#include <string>
#include <string_view>

namespace mt {

// Lower-case hex digest of `bytes`.
std::string sha256_hex(std::string_view bytes);
// Lower-case hex digest of the file at `path`; throws mt::Error naming it.
std::string sha256_file_hex(const std::string& path);

}  // namespace mt
