// `megatron plan --calibrate`: this machine's device profile, measured. Every
// rank measures at once (under `mpirun -n R` a "device" is one of R ranks
// sharing the host, as in a training run of R ranks): oneDNN GEMM rates of
// square matrices at a few sizes (the efficiency curve, fp32 and bf16 peaks),
// a triad's memory bandwidth, and between ranks 0 and 1 an all-reduce's
// bandwidth and the latency of a small all-reduce and of a p2p ping-pong.
#pragma once
#include "dist/communicator.h"
#include "train/device_profile.h"

namespace mt {

// Collective over `world` (all ranks of the job). With one rank no link is
// measured: the triad's copy rate stands in (said in the profile's sources).
DeviceProfile calibrate_device(const Communicator& world, const std::string& name);

}  // namespace mt
