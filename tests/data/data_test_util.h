// Helpers shared by the data tests: a self-removing temp directory, whole-file
// reads/writes, and the shared-data location.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

#include "temp_dir.h"

namespace mt::test {

// Where scripts/fetch_gpt2_tokenizer.sh (the ctest fixture fetch_gpt2_tokenizer)
// puts GPT-2's vocab.json and merges.txt; MT_GPT2_DIR overrides.
inline std::string gpt2_dir() {
  const char* env = std::getenv("MT_GPT2_DIR");
  return env != nullptr ? std::string(env) : std::string(MT_SOURCE_DIR) + "/data/gpt2";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string shared_data(const std::string& rel) { return std::string(MT_SHARED_DATA) + "/" + rel; }

inline bool shared_file_exists(const std::string& rel) {
  return std::filesystem::exists(shared_data(rel));
}

// Whether `msg` contains `part` (for error messages).
inline bool has(const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos;
}

// The message of the mt::Error that `f` throws ("" and a test failure if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mt::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected mt::Error, nothing thrown";
  return "";
}

}  // namespace mt::test
