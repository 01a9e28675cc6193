// Every binary answers --help with its usage (exit 0) and a bad argument with
// one line naming it and pointing at --help (exit 2): `megatron`, each of its
// subcommands and each bench/ binary. Never an uncaught exception (exit 134,
// "terminate called") or a usage dumped for a typo.
#include <filesystem>

#include "cli_test_util.h"

namespace mt::test {
namespace help_test {

std::string bench_binary(const std::string& name) {
  return (std::filesystem::path(MT_BINARY).parent_path() / "bench" / name).string();
}

struct Binary {
  std::string path;     // the executable
  std::string command;  // what to run, before the arguments
  std::string help_of;  // how its error line points at --help
};

std::vector<Binary> binaries() {
  std::vector<Binary> out = {{MT_BINARY, megatron(), "`megatron --help`"}};
  // Every subcommand `megatron --help` lists (CLI11: "Subcommands:", then
  // one indented "name  description" line each).
  std::istringstream help(run(megatron() + " --help").output);
  bool in_list = false;
  for (std::string line; std::getline(help, line);) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      const std::string sub = line.substr(2, line.find(' ', 2) - 2);
      out.push_back({MT_BINARY, megatron() + " " + sub, "`megatron " + sub + " --help`"});
    } else if (in_list && line.find_first_not_of(' ') != std::string::npos && line[0] != ' ') {
      in_list = false;
    }
  }
  for (const char* sub : {"train", "generate", "score", "serve", "preprocess", "convert", "plan",
                          "config"})
    EXPECT_TRUE(std::any_of(out.begin(), out.end(), [&](const Binary& b) {
      return b.command == megatron() + " " + sub;
    })) << "megatron --help does not list " << sub;
  // Every bench/bench_*.cc is a binary (bench/CMakeLists.txt).
  for (const auto& e : std::filesystem::directory_iterator(std::string(MT_SOURCE_DIR) + "/bench")) {
    const std::string name = e.path().stem().string();
    if (name.rfind("bench_", 0) == 0 && e.path().extension() == ".cc")
      out.push_back({bench_binary(name), bench_binary(name), "`" + name + " --help`"});
  }
  EXPECT_GE(out.size(), 10u);  // megatron, >= 4 subcommands, >= 5 bench binaries
  return out;
}

// A single error line: no second line, no abort.
void expect_one_error_line(const RunResult& r, const std::string& what, const std::string& tag) {
  EXPECT_EQ(r.exit_code, 2) << tag << "\n" << r.output;
  EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << tag << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << tag << "\n" << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << tag << "\n" << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << tag << "\n" << r.output;
}

TEST(Help, EveryBinaryPrintsItsUsageAndExitsZero) {
  for (const Binary& b : binaries()) {
    ASSERT_TRUE(std::filesystem::exists(b.path)) << b.path << " is not built";
    const RunResult r = run(b.command + " --help");
    EXPECT_EQ(r.exit_code, 0) << b.command << "\n" << r.output;
    EXPECT_NE(r.output.find("Usage: "), std::string::npos) << b.command << "\n" << r.output;
    EXPECT_NE(r.output.find("--help"), std::string::npos) << b.command << "\n" << r.output;
  }
}

TEST(Help, AnUnknownFlagIsOneLineNamingItAndPointingAtHelp) {
  for (const Binary& b : binaries()) {
    const RunResult r = run(b.command + " --no-such-flag");
    expect_one_error_line(r, "--no-such-flag", b.command);
    EXPECT_NE(r.output.find(b.help_of), std::string::npos) << b.command << "\n" << r.output;
  }
}

// A misspelt flag also leaves the required ones unset: the error names the
// misspelt one, which is what to fix.
TEST(Help, AMisspeltFlagIsNamedBeforeAMissingRequiredOne) {
  const RunResult r = run(megatron() + " train --train-iter 10");
  expect_one_error_line(r, "unknown flag --train-iter; the nearest flag of `megatron train` is "
                        "--train-iters", "train --train-iter 10");
}

// A value that is not a number, a value out of range, a config name that
// does not exist: one line naming the flag and the value, before any work.
TEST(Help, BadValuesOfTheBenchBinariesAreOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench_train --tp abc", "--tp: abc must be a number >= 1"},
      {"bench_train --threads -1", "--threads: -1 must be a number >= 0"},
      {"bench_train a 0", "iters: 0 must be a number >= 1"},
      {"bench_train zz", "config: zz not in {a,b,small,llama,qwen3,deepseek,all}"},
      {"bench_train --recompute partial", "--recompute: partial not in {full,selective}"},
      {"bench_grad_reduce --threads 0", "--threads: 0 must be a number >= 1"},
      {"bench_grad_reduce c", "config: c not in {small,b}"},
      {"bench_largest_model 20 x", "hidden: x must be a number >= 1"},
      {"bench_largest_model 20 2048 2048 2 7", "not expected: 7"},
      {"bench_matmul 3", "not expected: 3"},
      {"bench_checkpoint --reps 0", "--reps: 0 must be a number >= 1"},
  };
  for (const auto& [args, message] : cases)
    expect_one_error_line(run(bench_binary(args)), message, args);
}

TEST(Help, BadValuesOfMegatronSubcommandsAreOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --train-iters 1e3", "--train-iters"},
      {"generate --load x --top-k many", "--top-k"},
      {"preprocess --input x --workers two", "--workers"},
      {"nonsense", "nonsense"},
  };
  for (const auto& [args, message] : cases)
    expect_one_error_line(run(megatron() + " " + args), message, args);
}

// An error after parsing (a layout the world cannot hold) is one line too,
// through abort_job, with exit 1, not an uncaught mt::Error.
TEST(Help, ABenchRunErrorIsOneLineNotAnAbort) {
  const RunResult r = run(bench_binary("bench_train") + " a 1 --tp 3 --threads 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TP(3)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

}  // namespace help_test
}  // namespace mt::test
