// Context parallelism (--context-parallel-size) end to end under mpirun:
// misfits are refused by every rank with the numbers before any work.
#include "cli_test_util.h"

namespace mt::test {
namespace {

struct Misfit {
  int ranks;
  std::string flags, message;
};

TEST(ContextParallel, MisfitsAreRefusedWithTheNumbers) {
  TempDir dir;
  const std::string data = prepare_data(dir, synthetic_corpus(50));
  const Misfit cases[] = {
      {1, " --context-parallel-size 2", "TP(1) x PP(1) x CP(2) = 2"},
      {2, " --context-parallel-size 2 --tensor-model-parallel-size 2", "TP(2) x PP(1) x CP(2) = 4"},
      {2, " --context-parallel-size 2 --seq-length 30",
       "--seq-length 30 is not divisible by 2 x --context-parallel-size 2 = 4"},
      {2, " --context-parallel-size 0", "CP=0"},
  };
  for (const Misfit& m : cases) {
    const RunResult r = run(mpirun(m.ranks) + " train" + data + tiny_model_flags() +
                            " --train-iters 2" + m.flags);
    EXPECT_NE(r.exit_code, 0) << m.flags << "\n" << r.output;
    EXPECT_NE(r.exit_code, 124) << "job hung: " << m.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(m.message), std::string::npos) << m.flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace mt::test
