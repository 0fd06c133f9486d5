/* What the processor can do, read once (cpuid on x86-64). Kernels dispatch
 * on these flags at run time so one binary runs on any x86-64. */
#ifndef BRISK_CORE_CPU_H
#define BRISK_CORE_CPU_H

#include <stdbool.h>
#include <stdint.h>

typedef struct brisk_cpu_features {
  bool avx2, fma, f16c, avx512f;
} brisk_cpu_features;

const brisk_cpu_features *brisk_cpu(void);
/* Online logical processors, at least 1. */
int brisk_cpu_count(void);
/* Bytes of memory the system could give this process now without swapping
 * (Linux MemAvailable, else free pages); 0 when unknown. */
uint64_t brisk_memory_available(void);

#endif
