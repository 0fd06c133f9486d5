/* What the processor can do, read once (cpuid on x86-64, the kernel's
 * hardware capability words on aarch64). Kernels dispatch on these flags at
 * run time so one binary runs on any x86-64 or any aarch64. */
#ifndef BRISK_CORE_CPU_H
#define BRISK_CORE_CPU_H

#include <stdbool.h>
#include <stdint.h>

/* Every flag is true only when the processor has the instructions AND the
 * operating system saves the registers they use (XGETBV): AVX / AVX2 need
 * the YMM state, the AVX-512 flags the opmask and ZMM state as well. */
typedef struct brisk_cpu_features {
  bool avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl; /* the AVX-512 foundation and byte/word, 256-bit forms */
  bool avx512vnni;                  /* vpdpbusd on ZMM/YMM (EVEX) */
  bool avx512bf16;                  /* vdpbf16ps */
  bool avxvnni;                     /* vpdpbusd on YMM (VEX), AVX2-class CPUs */
  /* aarch64 (getauxval AT_HWCAP / AT_HWCAP2): Advanced SIMD, which every
   * AArch64 Linux system has, the int8 dot product (sdot, Armv8.2 DotProd)
   * and the int8 matrix multiply (smmla, Armv8.6 I8MM). */
  bool neon, dotprod, i8mm;
} brisk_cpu_features;

const brisk_cpu_features *brisk_cpu(void);

/* Kernel sets the CPU code has, in order: each includes the ones below. */
typedef enum brisk_isa_level {
  BRISK_ISA_SCALAR = 0,  /* portable C */
  BRISK_ISA_AVX2 = 1,    /* AVX2 + FMA + F16C */
  BRISK_ISA_AVXVNNI = 2, /* AVX2's, plus 256-bit VNNI kernels where the CPU has AVX-VNNI */
  BRISK_ISA_AVX512 = 3,  /* AVX2's, plus AVX-512 F/BW/VL + VNNI kernels */
  /* aarch64 levels: above every x86 one, so "the lower of two levels" works
   * within a process (it only ever sees one family). */
  BRISK_ISA_NEON = 4,         /* Advanced SIMD kernels (int8 dots by widening multiplies) */
  BRISK_ISA_NEON_DOTPROD = 5, /* NEON's, with sdot for the int8 dot products */
  BRISK_ISA_NEON_I8MM = 6,    /* DOTPROD's, plus smmla kernels for q8_0 / q4_0 GEMM tiles */
} brisk_isa_level;

/* The highest level of either family: "no cap". */
#define BRISK_ISA_BEST BRISK_ISA_NEON_I8MM

/* Whether a level is one of the aarch64 (NEON) ones. */
static inline bool brisk_isa_is_neon(brisk_isa_level level) { return level >= BRISK_ISA_NEON; }

/* The best level this processor (and OS) runs, capped by the environment
 * variable BRISK_CPU_ISA when it is set to scalar, avx2, avxvnni or avx512
 * (x86-64) or neon, dotprod, i8mm (aarch64) (read once; asking for more
 * than the processor has gives what it has; a name of the other
 * architecture's levels, or any other value, is ignored). Every CPU kernel
 * choice starts from this. */
brisk_isa_level brisk_cpu_isa_level(void);
/* What the processor runs, ignoring BRISK_CPU_ISA. */
brisk_isa_level brisk_cpu_isa_detected(void);
/* BRISK_CPU_ISA's rule: the lower of `detected` and the level `cap` names
 * ("scalar", "avx2", "avxvnni", "avx512", "neon", "dotprod", "i8mm"); NULL,
 * a name of the other family than detected's, or any other string leaves
 * detected. An AVX-512 CPU without AVX-VNNI capped at avxvnni runs the
 * AVX2 kernels. */
brisk_isa_level brisk_isa_capped(brisk_isa_level detected, const char *cap);
/* "scalar", "avx2", "avxvnni", "avx512", "neon", "dotprod", "i8mm". */
const char *brisk_isa_name(brisk_isa_level level);

/* Online logical processors, at least 1. */
int brisk_cpu_count(void);
/* Bytes of memory the system could give this process now without swapping
 * (Linux MemAvailable, else free pages); 0 when unknown. */
uint64_t brisk_memory_available(void);

#endif
