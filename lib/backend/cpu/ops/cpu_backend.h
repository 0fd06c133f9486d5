/* The CPU backend: the operation table over host memory, run on a thread
 * pool (or the host's parallel_for hook). */
#ifndef BRISK_BACKEND_CPU_OPS_CPU_BACKEND_H
#define BRISK_BACKEND_CPU_OPS_CPU_BACKEND_H

#include "backend/backend.h"
#include "core/threadpool.h"

typedef enum brisk_cpu_isa {
  BRISK_CPU_ISA_AUTO = 0,   /* the best this processor supports */
  BRISK_CPU_ISA_SCALAR = 1, /* portable C */
  BRISK_CPU_ISA_AVX2 = 2,   /* AVX2 + FMA + F16C */
  BRISK_CPU_ISA_AVX512 = 3, /* AVX2's, plus AVX-512 F/BW/VL + VNNI matmul kernels */
  BRISK_CPU_ISA_AVXVNNI = 4 /* AVX2's, plus AVX-VNNI matmul kernels where the CPU has them */
} brisk_cpu_isa;

/* Creates a CPU backend running its loops on `pool` (borrowed: it must
 * outlive the backend; NULL runs everything on the calling thread, or on
 * the host hook when one is installed). `isa` picks the kernels: AUTO the
 * best available (brisk_cpu_isa_level: the processor, capped by the
 * BRISK_CPU_ISA environment variable), SCALAR, AVX2 or AVX512 to force one
 * (tests, benchmarks), AVXVNNI likewise; a level the processor (or OS, or
 * build) lacks is
 * BRISK_E_UNSUPPORTED. The matmul runs at most that level (and never above
 * brisk_cpu_matmul_set_isa's cap); the other operations have scalar and AVX2
 * kernels, AVX2 at AVX512. Free with brisk_backend_free. */
brisk_status brisk_backend_cpu_create(brisk_threadpool *pool, brisk_cpu_isa isa,
                                      brisk_backend **out);

/* Bytes of matmul scratch the backend holds now (it grows to the largest
 * product seen). */
size_t brisk_backend_cpu_workspace_bytes(const brisk_backend *be);

#endif
