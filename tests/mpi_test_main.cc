// MPI for the multi-rank test binaries (dist, parallel). GTest::gtest_main owns main(), so MPI is brought up
// by a global test environment registered at static-initialisation time:
// SetUp initialises MPI (a plain run is a singleton world of 1, under
// `mpirun -n 2` every rank runs every test), TearDown finalises it.
//
// Only rank 0 prints gtest's usual output; other ranks print just their
// failures, prefixed "[rank R]", so a failure on any rank is still visible
// (and its non-zero exit code fails the mpirun test).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "comm/mpi_env.h"

namespace mt {
namespace {

// Failures only, with the rank, for ranks other than 0.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

// Replaces gtest's printer by a RankFailurePrinter on ranks other than 0.
// Safe to call twice (the second call finds no default printer).
void quiet_non_zero_rank(int rank) {
  if (rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  ::testing::TestEventListener* printer = listeners.default_result_printer();
  if (printer == nullptr) return;
  delete listeners.Release(printer);
  listeners.Append(new RankFailurePrinter(rank));
}

// The rank the launcher announces in the environment (Open MPI, PMIx, PMI /
// Slurm), or 0 if none: lets other ranks go quiet before gtest prints its
// header, i.e. before MPI is initialised.
int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

class MpiTestEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    env_ = std::make_unique<MpiEnv>();
    quiet_non_zero_rank(env_->world_rank());
  }
  void TearDown() override { env_.reset(); }

 private:
  std::unique_ptr<MpiEnv> env_;
};

// Registration object (gtest takes ownership of the environment).
const bool kMpiEnvironmentRegistered = [] {
  ::testing::AddGlobalTestEnvironment(new MpiTestEnvironment);
  quiet_non_zero_rank(launcher_rank());
  return true;
}();

// The environment is up for every test of this binary.
TEST(MpiTestMain, MpiIsInitialisedWithFunneledThreads) {
  int init = 0, level = 0;
  MPI_Initialized(&init);
  ASSERT_TRUE(init);
  MPI_Query_thread(&level);
  EXPECT_GE(level, MPI_THREAD_FUNNELED);
  (void)kMpiEnvironmentRegistered;
}

}  // namespace
}  // namespace mt
