// The MPI world as the api tests see it (1 rank, or every rank of
// `mpirun -n 2` running every test): this rank, the size, and a folder all
// ranks share.
#pragma once
#include <mpi.h>

#include <string>

#include "temp_dir.h"

namespace mt::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Rank 0's `path`, on every rank (the ranks share one machine).
inline std::string rank0_path(std::string path) {
  int n = int(path.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  path.resize(size_t(n));
  MPI_Bcast(path.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

// Rank 0's directory, on every rank.
inline std::string shared_dir(const TempDir& mine) { return rank0_path(mine.file("")); }

}  // namespace mt::test
