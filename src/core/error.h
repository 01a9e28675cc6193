// Errors: one checked path. MT_CHECK(cond, parts...) throws mt::Error with
// "file:line: parts..."; the CLI's top level prints it as one line and, in a
// multi-rank job, calls MPI_Abort so no rank is left waiting (see dist/).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Parts>
[[noreturn]] void fail(const char* file, int line, const Parts&... parts) {
  std::ostringstream os;
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  os << base << ":" << line << ": ";
  (os << ... << parts);
  throw Error(os.str());
}

}  // namespace mt

// MT_CHECK(cond, "what, with values", value, "; fix: ...")
#define MT_CHECK(cond, ...)                                   \
  do {                                                        \
    if (!(cond)) ::mt::fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define MT_FAIL(...) ::mt::fail(__FILE__, __LINE__, __VA_ARGS__)

#ifdef NDEBUG
#define MT_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#else
#define MT_DCHECK(cond, ...) MT_CHECK(cond, __VA_ARGS__)
#endif
