// MPI start-up, shutdown and the one way out on error.
//
// MpiEnv initialises MPI (MPI_THREAD_FUNNELED: only the main thread calls MPI;
// OpenMP threads compute) unless it is already initialised, and finalises it
// when destroyed if it was the one to initialise it. A plain `megatron train`
// without mpirun is an MPI singleton: a world of size 1.
//
// abort_job() is how a rank that hit an error ends the whole job, so that no
// other rank is left waiting in a collective: it prints one line
// "[rank R] error: <message>" to stderr and calls MPI_Abort when the world has
// more than one rank (a single rank finalises MPI and exits).
//
// How the CLI uses them (src/cli/main.cc):
//
//   int main(int argc, char** argv) {
//     mt::MpiEnv mpi(&argc, &argv);
//     try {
//       return run_command(argc, argv);      // throws mt::Error via MT_CHECK
//     } catch (const mt::Error& e) {
//       mt::abort_job(e.what());             // never returns
//     } catch (const std::exception& e) {
//       mt::abort_job(std::string("unexpected exception: ") + e.what());
//     }
//   }
//
// Every rank checks the configuration (ParallelState, batch sizes, ...) before
// any communication, so a misfit is reported by every rank with the numbers;
// an error on one rank mid-run brings the others down through MPI_Abort.
#pragma once
#include <string>

namespace mt {

class MpiEnv {
 public:
  // argc / argv may be null. Throws mt::Error if MPI cannot provide
  // MPI_THREAD_FUNNELED. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD.
  explicit MpiEnv(int* argc = nullptr, char*** argv = nullptr);
  ~MpiEnv();  // finalize(), unless an exception unwinds
  // MPI_Finalize (collective), if this object initialised MPI and it is still
  // running, inside a WaitScope: with a CommWatchdog alive, a peer that never
  // arrives (stopped, frozen) ends the job instead of hanging it at exit. Call
  // it after every Communicator is gone and before the watchdog is. Idempotent.
  void finalize();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  bool initialized_here() const { return owns_; }

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  bool owns_ = false;
};

// Rank in MPI_COMM_WORLD, or 0 when MPI is not running.
// True between MPI_Init and MPI_Finalize.
bool mpi_running();

int world_rank_or_zero();
// Size of MPI_COMM_WORLD, or 1 when MPI is not running.
int world_size_or_one();

// "[rank R] error: <message>" on stderr as one line (a message with newlines
// is joined by " | "), then MPI_Abort(MPI_COMM_WORLD, code) when the world
// has more than one rank, else MPI_Finalize (if MPI is running) and exit(code).
[[noreturn]] void abort_job(const std::string& message, int code = 1);

// The line abort_job prints (without the newline); exposed for tests.
std::string abort_line(int rank, const std::string& message);

}  // namespace mt
