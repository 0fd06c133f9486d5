#include "core/cpu.h"

#include <pthread.h>
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
