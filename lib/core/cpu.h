/* What the processor can do, read once (cpuid on x86-64). Kernels dispatch
 * on these flags at run time so one binary runs on any x86-64. */
#ifndef BRISK_CORE_CPU_H
#define BRISK_CORE_CPU_H

#include <stdbool.h>

typedef struct brisk_cpu_features {
  bool avx2, fma, f16c, avx512f;
} brisk_cpu_features;

const brisk_cpu_features *brisk_cpu(void);
/* Online logical processors, at least 1. */
int brisk_cpu_count(void);

#endif
