// Whole files as strings, for tests that write inputs and read outputs.
#pragma once
#include <fstream>
#include <iterator>
#include <string>

namespace mt::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace mt::test
