#include "core/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <ctime>

namespace mt {

std::string timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "[%Y-%m-%d %H:%M:%S] ", &tm);
  return buf;
}

bool is_user_terminal(int fd) {
  if (isatty(fd) == 0) return false;
  for (const char* launcher : {"OMPI_COMM_WORLD_SIZE", "PMI_RANK"})
    if (std::getenv(launcher) != nullptr) return false;
  return true;
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

void log_line(bool enabled, const char* fmt, ...) {
  if (!enabled) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

}  // namespace mt
