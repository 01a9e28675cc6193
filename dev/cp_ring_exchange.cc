// Time of the context-parallel ring's messages when nothing overlaps them:
// every rank sends `bytes` to rank+1 and receives as many from rank-1
// (MPI_Sendrecv, as one ring step of parallel/context_parallel_attention.cc
// with no block computation to hide behind), best of `reps` after a warm-up.
// Prints one JSON line: seconds per message (the slowest rank's).
// Built by bench/context_parallel_long.sh with mpicxx (not in CMake):
//   mpicxx -O2 -o cp_ring_exchange dev/cp_ring_exchange.cc
//   mpirun -n CP ./cp_ring_exchange BYTES [REPS]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long long bytes = argc > 1 ? std::atoll(argv[1]) : 0;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  if (bytes <= 0 || bytes % 4 != 0 || reps <= 0 || size < 2) {
    if (rank == 0)
      std::fprintf(stderr, "usage: mpirun -n CP (>= 2) cp_ring_exchange BYTES (multiple of 4 > 0)"
                           " [REPS > 0]\n");
    MPI_Finalize();
    return 2;
  }
  const int n = int(bytes / 4), next = (rank + 1) % size, prev = (rank + size - 1) % size;
  std::vector<float> out(size_t(n), 1.f), in(size_t(n), 0.f);  // touched before timing
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {  // r = 0: warm-up
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Sendrecv(out.data(), n, MPI_FLOAT, next, 1, in.data(), n, MPI_FLOAT, prev, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t = MPI_Wtime() - t0;
    if (r > 0) best = std::min(best, t);
  }
  double slowest = 0;
  MPI_Reduce(&best, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("{\"ranks\": %d, \"bytes\": %lld, \"seconds_per_message\": %.6f}\n", size, bytes,
                slowest);
  MPI_Finalize();
  return 0;
}
