// MpiBackend: CommBackend (comm_backend.h) over an MPI communicator. With
// mpi_env.cc, watchdog.cc and bf16_sum.{h,cc} the only code that includes
// <mpi.h>; this header does not, so Communicator's users never see MPI.
//
// Its communicators use MPI_ERRORS_RETURN, so a failing call returns its code
// (explained by MPI_Error_string) instead of aborting; each is freed
// (collectively) when its backend is destroyed, except while an exception
// unwinds (the other ranks are not there: the job is about to be aborted).
#pragma once
#include <memory>
#include <string>

#include "comm/comm_backend.h"

namespace mt {

// A backend over a duplicate of MPI_COMM_WORLD (collective; MPI must be
// running, see mpi_env.h).
std::unique_ptr<CommBackend> mpi_world_backend();

// MPI's words for an error code (MPI_Error_string).
std::string mpi_error_text(int rc);

// Throws mt::Error "MPI <op> on group '<group>' failed: <MPI error string>"
// unless rc == MPI_SUCCESS. For code that makes its own MPI calls.
void check_mpi(int rc, const char* op, const std::string& group);

}  // namespace mt
