// UTF-8 string helpers of the chat-template interpreter: whitespace (ASCII and
// the Unicode spaces both Python's str.strip and JavaScript's trim know),
// code-point length and slicing, case mapping of ASCII letters.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mt::chat {

// Bytes of the whitespace character at s[pos] (0 when none).
size_t space_at(std::string_view s, size_t pos);
// Bytes of the whitespace character ending at s[end-1] (0 when none).
size_t space_before(std::string_view s, size_t end);
std::string trim(std::string_view s, bool left = true, bool right = true);
// Split at runs of whitespace (Python's str.split()).
std::vector<std::string> split_whitespace(std::string_view s, long maxsplit);
// The code points of s, each as its UTF-8 bytes.
std::vector<std::string> code_points(std::string_view s);
std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);

}  // namespace mt::chat
