/* The runtime calls the CUDA backend makes, behind a table: the plugin fills
 * it from the CUDA runtime (rt_cudart.c), the test suite from the SIMT
 * emulation (tests/cudabe/rt_emu.c), where device memory is host memory and
 * every call completes before it returns. So the same backend code, the
 * same checks and the same kernel launches run in both.
 *
 * Every function returns 0 or the runtime's error code; error_string names
 * a code, is_oom says whether it is an out-of-memory error. Copies and
 * memsets are queued on the stream (ordered with the kernels there); a copy
 * from pageable host memory returns once the source may be reused.
 *
 * The GEMM entries are the tensor-core path of large matmuls: cuBLASLt in
 * the plugin (rt_cublaslt.c), brisk_kgemm over the SIMT emulation in the
 * tests. A table whose gemm_open is NULL, or fails, has no such path: the
 * backend then runs every matmul on its GEMV kernels. */
#ifndef BRISK_BACKEND_CUDA_CUDA_RT_H
#define BRISK_BACKEND_CUDA_CUDA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum brisk_cuda_copy {
  BRISK_CUDA_H2D = 1,
  BRISK_CUDA_D2H = 2,
  BRISK_CUDA_D2D = 3
} brisk_cuda_copy;

/* C[m][ldc] (F32, row-major, columns [0, n)) = A[m][k] . B[n][k]^T, A and B
 * row-major of `type` (BRISK_DTYPE_F16 or BRISK_DTYPE_BF16), F32
 * accumulation, no split-K reduction. */
typedef struct brisk_cuda_gemm_shape {
  uint32_t type;
  int64_t m, n, k, ldc;
} brisk_cuda_gemm_shape;

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

  /* GEMM library: a handle (create / destroy); a plan for one shape (the
   * matmul descriptor, the three layouts and the heuristic's algorithm for a
   * workspace of at most gemm_workspace_bytes); a product on the stream with
   * that plan. */
  int (*gemm_open)(void **handle);
  void (*gemm_close)(void *handle);
  int (*gemm_plan)(void *handle, const brisk_cuda_gemm_shape *shape, size_t workspace_bytes,
                   void **plan);
  void (*gemm_plan_free)(void *plan);
  int (*gemm_run)(void *handle, const void *plan, const void *a, const void *b, float *c,
                  void *workspace, size_t workspace_bytes, void *stream);
  size_t gemm_workspace_bytes; /* device workspace the plans may use */

  /* Graphs (cuda_graph.c): page-locked host memory, which a captured copy
   * reads when the graph runs; stream capture (relaxed: allocations are
   * allowed while capturing); a captured graph made executable, or an
   * executable one updated in place from a newer capture of the same
   * topology (nonzero when it cannot be: the caller instantiates anew);
   * launch on a stream. NULL capture_begin: no graphs. */
  int (*host_alloc)(void **p, size_t bytes);
  int (*host_free)(void *p);
  int (*capture_begin)(void *stream);
  int (*capture_end)(void *stream, void **graph);
  int (*graph_instantiate)(void *graph, void **exec);
  int (*graph_update)(void *exec, void *graph);
  int (*graph_launch)(void *exec, void *stream);
  void (*graph_free)(void *graph);
  void (*graph_exec_free)(void *exec);
} brisk_cuda_rt;

#endif
