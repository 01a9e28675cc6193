#include "memory/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace mt {

namespace {

// The first integer in the file, or -1 ("max" and unreadable files give -1).
int64_t read_int_file(const char* path) {
  std::ifstream in(path);
  long long v = -1;
  if (!(in >> v)) return -1;
  return v;
}

int64_t mem_available_from_meminfo() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return int64_t(kb) * 1024;
  }
  return -1;
}

std::string gb(double bytes) {
  char buf[32];
  if (bytes < 1e9)
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

}  // namespace

int64_t available_host_memory_bytes() {
  int64_t avail = mem_available_from_meminfo();
  auto lower_to = [&](int64_t limit, int64_t used) {
    // cgroup v1 reports "no limit" as a huge number; anything above 2^60 is none.
    if (limit <= 0 || used < 0 || limit > (int64_t(1) << 60)) return;
    const int64_t left = std::max<int64_t>(0, limit - used);
    avail = avail < 0 ? left : std::min(avail, left);
  };
  lower_to(read_int_file("/sys/fs/cgroup/memory.max"), read_int_file("/sys/fs/cgroup/memory.current"));
  lower_to(read_int_file("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
           read_int_file("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
  return avail;
}

std::string check_host_memory(double predicted_bytes, const ParallelState& ps, bool skip,
                              const char* who, const char* levers) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  // Ranks of one host share its memory: gather (host hash, bytes) of every rank.
  const int n = ps.world_size;
  std::vector<int64_t> table(size_t(2 * n), 0);
  table[size_t(2 * ps.world_rank)] = int64_t(std::hash<std::string>{}(host) & 0x3fffffffffffffff);
  // (an absurd request, e.g. 2^60 positions of cache, stays representable)
  table[size_t(2 * ps.world_rank + 1)] = int64_t(std::min(predicted_bytes, 9e18));
  ps.world_comm.all_reduce_sum(table.data(), int64_t(table.size()));
  const int64_t mine = table[size_t(2 * ps.world_rank)];
  double host_total = 0;
  int ranks = 0;
  for (int r = 0; r < n; ++r)
    if (table[size_t(2 * r)] == mine) {
      host_total += double(table[size_t(2 * r + 1)]);
      ++ranks;
    }
  const int64_t avail = available_host_memory_bytes();
  std::ostringstream line;
  line << "host memory: planned " << gb(host_total) << " for " << ranks << " rank"
       << (ranks > 1 ? "s" : "") << " on " << host << ", available "
       << (avail < 0 ? std::string("unknown") : gb(double(avail)));
  if (!skip && avail >= 0)  // every rank of the host reports it, as a misfit
    MT_CHECK(host_total <= double(avail), who, " needs ", gb(host_total), " (predicted: ",
             gb(predicted_bytes), " per rank x ", ranks, " rank", ranks > 1 ? "s" : "", " on host ",
             host, ") but only ", gb(double(avail)), " are available; fix: ", levers);
  return line.str();
}

}  // namespace mt
