#include "core/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__aarch64__) && defined(__linux__)
#  include <sys/auxv.h>
/* The bits of <asm/hwcap.h>, spelled out for older headers. */
#  define BRISK_HWCAP_ASIMD (1UL << 1)
#  define BRISK_HWCAP_ASIMDDP (1UL << 20)
#  define BRISK_HWCAP2_I8MM (1UL << 13)
#endif

#if defined(__x86_64__) || defined(__i386__)
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
#endif

/* cpuid says what the core implements; XCR0 (XGETBV, allowed once the OS
 * sets OSXSAVE) says which register state the OS saves on a context switch.
 * A flag without its state would fault (or corrupt registers) on use, as
 * under hypervisors or kernels that disable AVX-512. */
static brisk_cpu_features detect(void) {
  brisk_cpu_features f = {0};
#if defined(__x86_64__) || defined(__i386__)
  unsigned r[4], max;
  cpuid(0, 0, r);
  max = r[0];
  if (max < 1) return f;
  cpuid(1, 0, r);
  const bool osxsave = (r[2] >> 27) & 1, avx = (r[2] >> 28) & 1;
  const bool fma = (r[2] >> 12) & 1, f16c = (r[2] >> 29) & 1;
  uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t)hi << 32 | lo;
  }
  const bool ymm = avx && (xcr0 & 0x6) == 0x6;   /* SSE + AVX state */
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM0-15 upper, ZMM16-31 */
  if (!ymm || max < 7) return f;
  cpuid(7, 0, r);
  const unsigned b7 = r[1], c7 = r[2], max7 = r[0];
  f.avx2 = (b7 >> 5) & 1;
  f.fma = fma;
  f.f16c = f16c;
  if (zmm) {
    f.avx512f = (b7 >> 16) & 1;
    f.avx512bw = f.avx512f && ((b7 >> 30) & 1);
    f.avx512vl = f.avx512f && ((b7 >> 31) & 1);
    f.avx512vnni = f.avx512f && ((c7 >> 11) & 1);
  }
  if (max7 >= 1) {
    cpuid(7, 1, r);
    f.avxvnni = f.avx2 && ((r[0] >> 4) & 1);
    f.avx512bf16 = f.avx512f && ((r[0] >> 5) & 1);
  }
#elif defined(__aarch64__)
  /* Advanced SIMD is part of the AArch64 base; the kernel says which of the
   * optional int8 instructions it lets user space run. */
  f.neon = true;
#  ifdef __linux__
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = (hw & BRISK_HWCAP_ASIMD) != 0;
  f.dotprod = f.neon && (hw & BRISK_HWCAP_ASIMDDP) != 0;
  f.i8mm = f.neon && (hw2 & BRISK_HWCAP2_I8MM) != 0;
#  endif
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

brisk_isa_level brisk_cpu_isa_detected(void) {
  const brisk_cpu_features *f = brisk_cpu();
  if (f->neon)
    return f->i8mm && f->dotprod ? BRISK_ISA_NEON_I8MM
           : f->dotprod          ? BRISK_ISA_NEON_DOTPROD
                                 : BRISK_ISA_NEON;
  if (!(f->avx2 && f->fma && f->f16c)) return BRISK_ISA_SCALAR;
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni) return BRISK_ISA_AVX512;
  return f->avxvnni ? BRISK_ISA_AVXVNNI : BRISK_ISA_AVX2;
}

brisk_isa_level brisk_isa_capped(brisk_isa_level detected, const char *cap) {
  brisk_isa_level c = detected;
  if (!cap) return detected;
  if (strcmp(cap, "scalar") == 0)
    c = BRISK_ISA_SCALAR;
  else if (strcmp(cap, "avx2") == 0)
    c = BRISK_ISA_AVX2;
  else if (strcmp(cap, "avxvnni") == 0)
    c = BRISK_ISA_AVXVNNI;
  else if (strcmp(cap, "avx512") == 0)
    c = BRISK_ISA_AVX512;
  else if (strcmp(cap, "neon") == 0)
    c = BRISK_ISA_NEON;
  else if (strcmp(cap, "dotprod") == 0)
    c = BRISK_ISA_NEON_DOTPROD;
  else if (strcmp(cap, "i8mm") == 0)
    c = BRISK_ISA_NEON_I8MM;
  /* A level of the other family says nothing about this processor. */
  if (c != BRISK_ISA_SCALAR && detected != BRISK_ISA_SCALAR &&
      brisk_isa_is_neon(c) != brisk_isa_is_neon(detected))
    return detected;
  return c < detected ? c : detected;
}

static brisk_isa_level isa_level;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static void init_isa(void) {
  isa_level = brisk_isa_capped(brisk_cpu_isa_detected(), getenv("BRISK_CPU_ISA"));
}

brisk_isa_level brisk_cpu_isa_level(void) {
  pthread_once(&isa_once, init_isa);
  return isa_level;
}

const char *brisk_isa_name(brisk_isa_level level) {
  switch (level) {
  case BRISK_ISA_AVX2: return "avx2";
  case BRISK_ISA_AVXVNNI: return "avxvnni";
  case BRISK_ISA_AVX512: return "avx512";
  case BRISK_ISA_NEON: return "neon";
  case BRISK_ISA_NEON_DOTPROD: return "dotprod";
  case BRISK_ISA_NEON_I8MM: return "i8mm";
  default: return "scalar";
  }
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
