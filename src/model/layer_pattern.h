// Megatron's per-layer patterns (`--moe-layer-freq`): the list expressions its
// moe_freq_type accepts and evaluates with Python, read here without Python.
// Grammar (Python's meaning; only digits, commas, brackets, parentheses, + and *):
//   expr   := term ('+' term)*            list concatenation
//   term   := factor ('*' count)* | count '*' term   repetition
//   factor := '[' int (',' int)* ']' | '(' expr ')'
// e.g. "[0]*3+[1]*58", "([0]+[1]*26)", "([1]*3+[0]*1)*3", "[0,1,1,1]".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// The pattern's entries, or an error naming `flag`, the text and what is wrong.
std::vector<int64_t> eval_layer_pattern(const std::string& flag, const std::string& pattern);

}  // namespace mt
