#include "core/log.h"

#include <cstdarg>
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

void log_line(bool enabled, const char* fmt, ...) {
  if (!enabled) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

}  // namespace mt
