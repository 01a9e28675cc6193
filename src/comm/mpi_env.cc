#include "comm/mpi_env.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"
#include "comm/mpi_backend.h"
#include "comm/watchdog.h"

namespace mt {

bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
namespace {


}  // namespace

MpiEnv::MpiEnv(int* argc, char*** argv) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  MT_CHECK(!fin, "MpiEnv: MPI was already finalised; fix: create one MpiEnv for the program");
  if (!init) {
    int provided = 0;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MT_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed with code ", rc,
             "; fix: check the MPI installation (mpirun --version) and the launcher");
    owns_ = true;
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      owns_ = false;
      MT_FAIL("MPI provides thread level ", provided, ", below MPI_THREAD_FUNNELED (",
              MPI_THREAD_FUNNELED, "); fix: use an MPI built with thread support");
    }
  }
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "Comm_set_errhandler",
            "world");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "Comm_rank", "world");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "Comm_size", "world");
}

MpiEnv::~MpiEnv() {
  // MPI_Finalize is collective: skip it while an error unwinds (the caller
  // aborts the job with abort_job, which needs MPI still running).
  if (std::uncaught_exceptions() > 0) return;
  finalize();
}

void MpiEnv::finalize() {
  if (!owns_ || !mpi_running()) return;
  static const GroupId world{"world", "all " + std::to_string(world_size_) + " ranks"};
  WaitScope waiting("MPI_Finalize", &world);
  MPI_Finalize();
}

int world_size_or_one() {
  if (!mpi_running()) return 1;
  int size = 1;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "Comm_size", "world");
  return size;
}

int world_rank_or_zero() {
  if (!mpi_running()) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string abort_line(int rank, const std::string& message) {
  std::string line = "[rank " + std::to_string(rank) + "] error: ";
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] == '\n') {
      if (i + 1 < message.size()) line += " | ";
    } else {
      line += message[i];
    }
  }
  return line;
}

void abort_job(const std::string& message, int code) {
  const bool running = mpi_running();
  int rank = 0, size = 1;
  if (running) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  // One write() so that lines of different ranks do not interleave.
  const std::string line = abort_line(rank, message) + "\n";
  std::fflush(stdout);
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
  if (running && size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  if (running) MPI_Finalize();
  std::exit(code);
}

}  // namespace mt
