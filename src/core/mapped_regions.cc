#include "core/mapped_regions.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace mt {
namespace {

constexpr int kMaxRegions = 64;
constexpr size_t kMaxPath = 512;

// Read by the signal handler: each slot is published by its `begin` (0 =
// free), written last with release order.
struct Region {
  std::atomic<uintptr_t> begin{0};
  size_t len = 0;
  char path[kMaxPath] = {};
};

Region g_regions[kMaxRegions];
std::mutex g_mutex;  // registration only (never taken in the handler)
bool g_installed = false;
char g_rank[16] = "0";

// Async-signal-safe decimal.
size_t format_u64(char* out, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

// Appends s to buf[*at..cap) (async-signal-safe).
void append(char* buf, size_t* at, size_t cap, const char* s) {
  for (; *s != '\0' && *at + 1 < cap; ++s) buf[(*at)++] = *s;
}

void append_u64(char* buf, size_t* at, size_t cap, uint64_t v) {
  char digits[24];
  const size_t n = format_u64(digits, v);
  for (size_t i = 0; i < n && *at + 1 < cap; ++i) buf[(*at)++] = digits[i];
}

size_t write_message(char* buf, size_t cap, const char* path, size_t offset, size_t size) {
  size_t at = 0;
  append(buf, &at, cap, path);
  append(buf, &at, cap, ": read at byte ");
  append_u64(buf, &at, cap, offset);
  append(buf, &at, cap, " failed: the file is no longer the ");
  append_u64(buf, &at, cap, size);
  append(buf, &at, cap,
         " bytes it had when opened (truncated or rewritten while this job reads it); fix: "
         "do not modify or replace a dataset while a job uses it (write a new prefix), then "
         "resume from the last checkpoint");
  buf[at] = '\0';
  return at;
}

void on_sigbus(int sig, siginfo_t* info, void*) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Region& r : g_regions) {
    const uintptr_t begin = r.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr - begin >= r.len) continue;
    char line[kMaxPath + 512];
    size_t at = 0;
    append(line, &at, sizeof line, "[rank ");
    append(line, &at, sizeof line, g_rank);
    append(line, &at, sizeof line, "] error: ");
    at += write_message(line + at, sizeof line - at - 1, r.path, addr - begin, r.len);
    line[at++] = '\n';
    ssize_t unused = ::write(STDERR_FILENO, line, at);
    (void)unused;
    ::_exit(1);
  }
  // Not a registered mapping: the default action (delivered when the handler
  // returns, the signal being blocked inside it).
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_handler() {
  // The rank for the message (the launcher's variables; MPI may not be up).
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0' && std::strlen(v) < sizeof g_rank) {
      std::strcpy(g_rank, v);
      break;
    }
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace

void register_mapped_region(const void* addr, size_t len, const std::string& path) {
  if (addr == nullptr || len == 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_installed) {
    install_handler();
    g_installed = true;
  }
  for (Region& r : g_regions) {
    if (r.begin.load(std::memory_order_relaxed) != 0) continue;
    r.len = len;
    std::strncpy(r.path, path.c_str(), kMaxPath - 1);
    r.path[kMaxPath - 1] = '\0';
    r.begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return;
  }
}

void unregister_mapped_region(const void* addr) {
  if (addr == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Region& r : g_regions)
    if (r.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(addr))
      r.begin.store(0, std::memory_order_release);
}

std::string mapped_region_fault_message(const char* path, size_t offset, size_t size) {
  char buf[kMaxPath + 512];
  write_message(buf, sizeof buf, path, offset, size);
  return buf;
}

}  // namespace mt
