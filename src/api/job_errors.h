// How the public classes' runs fail: as the binary's commands do, an error
// on any rank ends the whole job with one line (mt::abort_job: MPI_Abort in
// a multi-rank job), so that no rank waits for one that died. Misuse of a
// class (a call out of order) is checked before, as std::logic_error to the
// caller.
#pragma once
#include <exception>
#include <string>

#include "comm/mpi_env.h"
#include "core/error.h"

namespace mt {

// f(), an error in it ending the job.
template <class F>
auto ending_job_on_error(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    abort_job(e.what());
  } catch (const std::exception& e) {
    abort_job(std::string("unexpected error: ") + e.what());
  }
}

}  // namespace mt
