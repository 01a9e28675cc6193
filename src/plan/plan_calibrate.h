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

// Collective over `world` (all ranks of the job). With one rank no link is
// measured: the triad's copy rate stands in (said in the profile's sources).
DeviceProfile calibrate_device(const Communicator& world, const std::string& name);

}  // namespace mt
