// The bad-input harness of DEVELOPERS.md's table: run `megatron` with
// arguments that must fail, and check a non-zero exit, a substring of the
// message, and that the error is exactly one line.
#pragma once
#include <sstream>
#include <string>

#include "cli_test_util.h"

namespace mt::test {

struct BadInputCase {
  const char* name;
  std::string args;      // appended to `megatron`; {data}, {dir} substituted
  const char* expected;  // substring of the output
};

inline std::string substitute(std::string s, const std::string& data, const std::string& dir) {
  for (size_t p; (p = s.find("{data}")) != std::string::npos;) s.replace(p, 6, data);
  for (size_t p; (p = s.find("{dir}")) != std::string::npos;) s.replace(p, 5, dir);
  return s;
}

// A small preprocessed corpus in a temp dir; train() gives a tiny run on it.
class BadInputFixture : public ::testing::Test {
 protected:
  TempDir dir;
  std::string data;
  void SetUp() override { data = prepare_data(dir, synthetic_corpus(50)); }
  std::string train(const std::string& extra) const {
    return " train" + data + tiny_model_flags() + " --train-iters 8 --eval-interval 0" + extra;
  }
  void expect_fails(const BadInputCase& c) const {
    const RunResult r = run(megatron() + substitute(c.args, data, dir.file("")));
    EXPECT_NE(r.exit_code, 0) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos)
        << c.name << ": expected '" << c.expected << "' in:\n" << r.output;
    int error_lines = 0;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);)
      error_lines += line.find("error") != std::string::npos;
    EXPECT_EQ(error_lines, 1) << c.name << ": the error is not one line\n" << r.output;
  }
};

}  // namespace mt::test
