// SIGTERM / SIGINT ask the run to save (when --save is set) and exit 0 at the
// end of the current iteration; all ranks agree on it through an all-reduce.
#pragma once

namespace mt {

void install_exit_signal_handlers();
bool exit_signal_received();

}  // namespace mt
