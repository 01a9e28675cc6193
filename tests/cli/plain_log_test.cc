// The training log is plain text wherever it is not a terminal a person
// watches: with stdout in a file, alone or under mpirun (whose ranks write to
// a pseudo-terminal even when mpirun's output goes to a file), not one escape
// byte; on a real terminal the progress line still redraws itself.
#include "cli_test_util.h"

namespace mt::test {
namespace plain_log_test {

class PlainLog : public ::testing::Test {
 protected:
  void SetUp() override {
    flags_ = " train" + prepare_data(dir_, synthetic_corpus(50)) + tiny_model_flags() +
             " --train-iters 6 --log-interval 3 --eval-interval 3 --eval-iters 1";
  }
  // Runs `command` with stdout into a file; returns the file's bytes.
  std::string stdout_of(const std::string& command) {
    const std::string out = dir_.file("stdout.txt");
    const RunResult r = run(command + " > " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string text = read_text(out);
    // Not vacuous: the log lines, the evaluation and the progress were due.
    EXPECT_NE(text.find("iteration        6/       6"), std::string::npos) << text;
    EXPECT_NE(text.find("validation at iteration 3"), std::string::npos) << text;
    return text;
  }
  TempDir dir_;
  std::string flags_;
};

TEST_F(PlainLog, OneRankWithStdoutInAFileWritesNoEscapeBytes) {
  const std::string text = stdout_of(megatron() + flags_);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
}

TEST_F(PlainLog, MpirunWithStdoutInAFileWritesNoEscapeBytes) {
  const std::string text = stdout_of(mpirun(2) + flags_);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
}

// script(1) (util-linux, in every Debian) runs the command on a new
// pseudo-terminal, as a person's shell would: the progress line is there.
TEST_F(PlainLog, OnATerminalTheProgressLineRedraws) {
  const RunResult r = run("script -qec '" + megatron() + flags_ + "' /dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\r\x1b[K iteration 1/6"), std::string::npos) << r.output;
}

}  // namespace plain_log_test
}  // namespace mt::test
