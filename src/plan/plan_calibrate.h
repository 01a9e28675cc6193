// `megatron plan --calibrate`: this machine's device profile, measured with
// this program's own kernels and calls. Under `mpirun -n R` a "device" is one
// of R ranks sharing the host, as in a training run of R ranks: min(R, cores)
// ranks measure compute at once (oneDNN linear layers at a few shapes, fp32
// and bf16 curves; the attention core by sequence length, precision and
// dropout; a triad's memory bandwidth), and all R ranks the α–β of each
// collective (all-reduce, reduce-scatter, all-gather, p2p ping-pong).
#pragma once
#include "comm/communicator.h"
#include "plan/device_profile.h"

namespace mt {

// How much each measurement runs. quick(): the same fields from a quarter of
// the rows, one round and fewer repeats (a rough profile in a fraction of the
// time: `--calibrate-quick`, for tests of the mechanism).
struct CalibrateOptions {
  int64_t rows = 2048;             // tokens of each linear layer's GEMMs
  int rounds = 2;                  // of the GEMM curves (best of)
  int reps = 3;                    // timed runs of a kernel at least (after a warm-up)
  int64_t triad_floats = int64_t(32) << 20;  // of each of the triad's three arrays
  int small_reps = 100, big_reps = 5;        // of each collective, 4 bytes and 4 MB per rank
  static CalibrateOptions quick() { return {512, 1, 1, int64_t(8) << 20, 20, 2}; }
};

// Hardware threads this process may run on (its CPU affinity), at least 1.
int host_cores();

// Collective over `world` (all ranks of the job). With one rank no link is
// measured: the triad's copy rate stands in (said in the profile's sources).
DeviceProfile calibrate_device(const Communicator& world, const std::string& name,
                               const CalibrateOptions& opt = {});

}  // namespace mt
