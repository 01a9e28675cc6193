#include "comm/bf16_sum.h"

#include "core/error.h"
#include "comm/mpi_backend.h"
#include "comm/mpi_env.h"
#include "kernels/precision.h"

namespace mt {
namespace {

// MPI_User_function: inoutvec[i] = invec[i] + inoutvec[i] in bf16. Called by
// MPI inside a reduction: it must not throw. MPI passes the datatype of the
// call; only MPI_UINT16_T reaches it (Communicator's bf16 collectives).
void bf16_sum_user_fn(void* invec, void* inoutvec, int* len, MPI_Datatype*) {
  bf16_sum_into(static_cast<uint16_t*>(inoutvec), static_cast<const uint16_t*>(invec), *len);
}

}  // namespace

void bf16_sum_into(uint16_t* inout, const uint16_t* in, int64_t n) {
  // One thread: MPI calls this on its own pieces (segments of a few kB to
  // MB); an OpenMP fork here would run inside MPI's progress.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    inout[i] = bf16_from_f32(f32_from_bf16(inout[i]) + f32_from_bf16(in[i]));
}

MPI_Op bf16_sum_op() {
  MT_CHECK(mpi_running(), "bf16_sum_op() needs MPI; fix: construct mt::MpiEnv first");
  static const MPI_Op op = [] {
    MPI_Op o = MPI_OP_NULL;
    check_mpi(MPI_Op_create(&bf16_sum_user_fn, /*commute=*/1, &o), "Op_create(bf16 sum)", "-");
    return o;
  }();
  return op;
}

}  // namespace mt
