#include "comm/mpi_env.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

namespace mt {
namespace mpi_env_test {

TEST(MpiEnv, NestedEnvDoesNotFinalize) {
  {
    MpiEnv inner;  // MPI is already up (test environment): not ours to finalise
    EXPECT_FALSE(inner.initialized_here());
    int size = 0, rank = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    EXPECT_EQ(inner.world_size(), size);
    EXPECT_EQ(inner.world_rank(), rank);
    EXPECT_EQ(world_rank_or_zero(), rank);
  }
  int fin = 1;
  MPI_Finalized(&fin);
  EXPECT_FALSE(fin);
}

TEST(MpiEnv, AbortLineIsOneLineWithTheRank) {
  EXPECT_EQ(abort_line(3, "tp.cc:10: bad size 7"), "[rank 3] error: tp.cc:10: bad size 7");
  EXPECT_EQ(abort_line(0, "first\nsecond\n"), "[rank 0] error: first | second");
}

// abort_job ends the process with the code after printing its line. A death
// test re-executes this binary, which is only a fresh singleton when the job
// is a world of 1; under mpirun the line format is covered above.
TEST(MpiEnv, AbortJobPrintsAndExitsWithCode) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(abort_job("tp.cc:10: boom\nmore", 3), ::testing::ExitedWithCode(3),
                "\\[rank 0\\] error: tp\\.cc:10: boom \\| more");
  }
}

}  // namespace mpi_env_test
}  // namespace mt
