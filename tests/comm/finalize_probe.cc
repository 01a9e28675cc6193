// A program for tests/cli/comm_timeout_test.cc: MPI_Finalize under the
// communication watchdog. Rank 1 sleeps PROBE_SLEEP_S seconds before
// finalising (a peer frozen at the very end of a job); every rank runs a
// CommWatchdog of PROBE_TIMEOUT_S seconds. Rank 0 must be ended by its
// watchdog (non-zero exit, the watchdog's line naming MPI_Finalize), not wait.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "comm/mpi_env.h"
#include "comm/watchdog.h"

int main() {
  const char* timeout = std::getenv("PROBE_TIMEOUT_S");
  const char* sleep_s = std::getenv("PROBE_SLEEP_S");
  if (timeout == nullptr || sleep_s == nullptr) {
    std::fprintf(stderr, "finalize_probe: set PROBE_TIMEOUT_S and PROBE_SLEEP_S\n");
    return 2;
  }
  mt::MpiEnv mpi;
  mt::CommWatchdog watchdog(std::atof(timeout));
  if (mpi.world_rank() == 1) ::sleep(unsigned(std::atoi(sleep_s)));
  mpi.finalize();
  std::printf("finalize_probe: rank %d finalized\n", mpi.world_rank());
  return 0;
}
