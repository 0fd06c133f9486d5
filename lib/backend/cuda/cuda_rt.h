/* The runtime calls the CUDA backend makes, behind a table: the plugin fills
 * it from the CUDA runtime (rt_cudart.c), the test suite from the SIMT
 * emulation (tests/cudabe/rt_emu.c), where device memory is host memory and
 * every call completes before it returns. So the same backend code, the
 * same checks and the same kernel launches run in both.
 *
 * Every function returns 0 or the runtime's error code; error_string names
 * a code, is_oom says whether it is an out-of-memory error. Copies and
 * memsets are queued on the stream (ordered with the kernels there); a copy
 * from pageable host memory returns once the source may be reused. */
#ifndef BRISK_BACKEND_CUDA_CUDA_RT_H
#define BRISK_BACKEND_CUDA_CUDA_RT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum brisk_cuda_copy {
  BRISK_CUDA_H2D = 1,
  BRISK_CUDA_D2H = 2,
  BRISK_CUDA_D2D = 3
} brisk_cuda_copy;

typedef struct brisk_cuda_rt {
  const char *name; /* "cuda", "cuda-emu" */
  int (*set_device)(int device);
  int (*malloc)(void **p, size_t bytes);
  int (*free)(void *p);
  int (*memcpy_async)(void *dst, const void *src, size_t bytes, brisk_cuda_copy kind, void *stream);
  int (*memset_async)(void *dst, int value, size_t bytes, void *stream);
  int (*stream_create)(void **stream);
  int (*stream_destroy)(void *stream);
  int (*stream_sync)(void *stream);
  const char *(*error_string)(int error);
  bool (*is_oom)(int error);
} brisk_cuda_rt;

#endif
