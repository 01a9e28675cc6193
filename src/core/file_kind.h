// What a path that should be a regular file is instead, for messages: readers
// refuse FIFOs (a read blocks forever), directories and devices before opening.
#pragma once
#include <sys/stat.h>

namespace mt {

inline const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace mt
