#include "core/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static brisk_cpu_features detect(void) {
  brisk_cpu_features f = {0};
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  /* gcc 12 has no "f16c" name for __builtin_cpu_supports: read cpuid leaf 1,
   * ECX bit 29, directly. The OS-saves-YMM check is implied by avx2 above. */
  unsigned a, b, c, d;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  f.f16c = (c >> 29) & 1;
#endif
  return f;
}

static brisk_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;
static void init_features(void) { features = detect(); }

const brisk_cpu_features *brisk_cpu(void) {
  pthread_once(&features_once, init_features);
  return &features;
}

int brisk_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : (int)n;
}

uint64_t brisk_memory_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[128];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
      found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    fclose(f);
    if (found) return kb > UINT64_MAX / 1024 ? UINT64_MAX : (uint64_t)kb * 1024;
  }
#ifdef _SC_AVPHYS_PAGES
  const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) return (uint64_t)pages * (uint64_t)size;
#endif
  return 0;
}
