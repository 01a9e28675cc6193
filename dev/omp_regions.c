// Where a run's OpenMP time goes, region by region: an LD_PRELOAD shim over
// libgomp's GOMP_parallel (each `#pragma omp parallel`, and oneDNN's threaded
// kernels) that times every top-level region and each thread's share of it.
// At exit it prints to stderr, per outlined function (one per parallel
// construct; oneDNN's all share one), the calls, the region wall time, each
// thread's busy time and the waste (threads x wall - busy: time a thread sat
// at the region's end or was late to start), worst first, then the time the
// main thread spent between regions, the gaps of the most costly pairs of
// consecutive regions. Names are "object+0xoffset": `addr2line -f -C -e
// object 0xoffset` gives the function (the executable's own are static).
// Loops with other schedules (GOMP_parallel_loop_*) are not seen.
//
//   gcc -O2 -fPIC -shared -fopenmp dev/omp_regions.c -o /tmp/omp_regions.so -ldl
//   OMP_REGIONS_SKIP=6 LD_PRELOAD=/tmp/omp_regions.so ./build/bench/bench_train a 300 --threads 2
//
// OMP_REGIONS_SKIP: seconds after start-up to leave out (bench_train's peak
// measurement takes the first ~3 s). Up to 8 threads are timed; regions are
// assumed to start from one thread (the tables are not locked).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kSlots = 4096, kThreads = 8 };

typedef void (*Parallel)(void (*)(void*), void*, unsigned, unsigned);

struct Region {  // per outlined function
  void* fn;
  long calls;
  double wall, busy[kThreads];
  int threads;
};
struct Gap {  // main-thread time between two consecutive regions
  void *before, *after;
  long count;
  double seconds;
};
struct Call {  // what the trampoline needs
  void (*fn)(void*);
  void* data;
  double busy[kThreads];
};

static struct Region regions[kSlots];
static struct Gap gaps[kSlots];
static double skip_until, last_end, between;
static void* last_fn;
static int depth;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t hash(uintptr_t a, uintptr_t b) { return (size_t)((a >> 4) * 31 + (b >> 4)) % kSlots; }

static struct Region* region_of(void* fn) {
  size_t h = hash((uintptr_t)fn, 0);
  while (regions[h].fn && regions[h].fn != fn) h = (h + 1) % kSlots;
  regions[h].fn = fn;
  return &regions[h];
}

static struct Gap* gap_of(void* before, void* after) {
  size_t h = hash((uintptr_t)before, (uintptr_t)after);
  while (gaps[h].after && (gaps[h].before != before || gaps[h].after != after))
    h = (h + 1) % kSlots;
  gaps[h].before = before;
  gaps[h].after = after;
  return &gaps[h];
}

static void timed(void* p) {
  struct Call* c = p;
  const double t0 = now();
  c->fn(c->data);
  const int t = omp_get_thread_num();
  if (t < kThreads) c->busy[t] = now() - t0;
}

void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads, unsigned flags) {
  static Parallel real;
  if (!real) real = (Parallel)dlsym(RTLD_NEXT, "GOMP_parallel");
  const double start = now();
  if (depth > 0 || start < skip_until) {  // nested, or still in the skipped start-up
    real(fn, data, threads, flags);
    return;
  }
  if (last_end > 0) {
    between += start - last_end;
    struct Gap* g = gap_of(last_fn, (void*)fn);
    g->count++;
    g->seconds += start - last_end;
  }
  struct Call c;
  memset(&c, 0, sizeof c);
  c.fn = fn;
  c.data = data;
  ++depth;
  real(timed, &c, threads, flags);
  --depth;
  const double end = now();
  struct Region* r = region_of((void*)fn);
  r->calls++;
  r->wall += end - start;
  for (int t = 0; t < kThreads; ++t) {
    r->busy[t] += c.busy[t];
    if (c.busy[t] > 0 && t + 1 > r->threads) r->threads = t + 1;
  }
  last_end = end;
  last_fn = (void*)fn;
}

static double waste(const struct Region* r) {
  double w = r->threads * r->wall;
  for (int t = 0; t < r->threads; ++t) w -= r->busy[t];
  return w;
}

static int by_waste(const void* a, const void* b) {
  const double x = waste(a), y = waste(b);
  return x < y ? 1 : x > y ? -1 : 0;
}

static int by_seconds(const void* a, const void* b) {
  const double x = ((const struct Gap*)a)->seconds, y = ((const struct Gap*)b)->seconds;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void name(void* p, char* out, size_t size) {
  Dl_info info;
  if (p && dladdr(p, &info) && info.dli_fname)
    snprintf(out, size, "%s+0x%lx", info.dli_fname,
             (unsigned long)((char*)p - (char*)info.dli_fbase));
  else
    snprintf(out, size, "%p", p);
}

__attribute__((constructor)) static void start(void) {
  const char* skip = getenv("OMP_REGIONS_SKIP");
  skip_until = now() + (skip ? atof(skip) : 0.0);
}

__attribute__((destructor)) static void report(void) {
  qsort(regions, kSlots, sizeof regions[0], by_waste);
  long calls = 0;
  double wall = 0, wasted = 0;
  for (int i = 0; i < kSlots; ++i)
    if (regions[i].fn) calls += regions[i].calls, wall += regions[i].wall, wasted += waste(&regions[i]);
  fprintf(stderr,
          "omp_regions: %ld regions, %.3f s inside them, %.3f thread-s wasted, %.3f s between "
          "them\n",
          calls, wall, wasted, between);
  char a[512], b[512];
  for (int i = 0; i < 30 && regions[i].fn; ++i) {
    const struct Region* r = &regions[i];
    name(r->fn, a, sizeof a);
    fprintf(stderr, "%9ld calls  wall %8.3f s  busy", r->calls, r->wall);
    for (int t = 0; t < r->threads; ++t) fprintf(stderr, " %.3f", r->busy[t]);
    fprintf(stderr, "  waste %.3f  %s\n", waste(r), a);
  }
  qsort(gaps, kSlots, sizeof gaps[0], by_seconds);
  for (int i = 0; i < 10 && gaps[i].after; ++i) {
    name(gaps[i].before, a, sizeof a);
    name(gaps[i].after, b, sizeof b);
    fprintf(stderr, "gap %9ld x  %.3f s  %s -> %s\n", gaps[i].count, gaps[i].seconds, a, b);
  }
}
