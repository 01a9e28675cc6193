#include "train/signals.h"

#include <csignal>

namespace mt {

namespace {
volatile std::sig_atomic_t g_exit_signal = 0;  // the one global a signal handler needs
void on_signal(int) { g_exit_signal = 1; }
}  // namespace

void install_exit_signal_handlers() {
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
}

bool exit_signal_received() { return g_exit_signal != 0; }

}  // namespace mt
