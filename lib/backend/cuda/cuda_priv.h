/* The CUDA backend's private state and helpers, shared by its files:
 * cuda_backend.c (the table and the operations), cuda_gemm.c (the
 * tensor-core matmul path), cuda_graph.c (decode steps as CUDA graphs) and
 * cuda_mla.c (latent attention).
 * Nothing outside lib/backend/cuda includes it. */
#ifndef BRISK_BACKEND_CUDA_CUDA_PRIV_H
#define BRISK_BACKEND_CUDA_CUDA_PRIV_H

#include "backend/cuda/cuda_backend.h"

/* Regrouped for the CUDA matmul kernels (kernels/regroup.h): lives only in
 * device memory, like the CPU's packed ids only in host memory. */
#define CUDA_REGROUPED 0x200u

/* Device memory that grows to the largest request and is reused: every use
 * is ordered on the one stream, so a later copy into it cannot overtake an
 * earlier kernel still reading it. */
typedef struct scratch {
  void *p;
  size_t cap;
} scratch;

/* One cached GEMM plan (cuda_gemm.c). */
typedef struct gemm_plan_slot {
  brisk_cuda_gemm_shape shape;
  void *plan;
} gemm_plan_slot;

#define CUDA_GEMM_PLANS 16

typedef struct cuda_graphs cuda_graphs; /* cuda_graph.c */

typedef struct cuda_backend {
  brisk_backend base; /* first: the table the caller holds */
  const brisk_cuda_rt *rt;
  int device;
  void *stream;
  char name[32];
  scratch meta; /* host metadata of the current operation */
  scratch work; /* attention's split-KV partials */
  scratch tmp;  /* small outputs copied back (MoE routing) */
  /* The GEMM path (cuda_gemm.c): NULL handle when the runtime has none. */
  void *gemm;
  int64_t gemm_min_rows;  /* matmuls of at least this many rows take it; 0: never */
  size_t gemm_tile_bytes; /* bound on one dequantized weight tile */
  scratch gemm_buf;       /* x in the compute type, a weight tile, the library's workspace */
  gemm_plan_slot plans[CUDA_GEMM_PLANS];
  int next_plan;
  uint64_t gemm_calls; /* matmuls that took the GEMM path (tests, benchmarks) */
  /* Decode steps as graphs (cuda_graph.c); NULL until the first step. */
  cuda_graphs *graphs;
} cuda_backend;

/* A runtime error as a status (out of memory: BRISK_E_OUT_OF_MEMORY). */
brisk_status brisk_cuda_status(cuda_backend *cb, int e, const char *what);
/* A kernel launcher's status, with the kernel's own message. */
brisk_status brisk_cuda_launched(cuda_backend *cb, int e, const char *kernel);
/* *out = at least `bytes` of device scratch from s (grown as needed, every
 * earlier use finished first), or, while a graph is being captured, from
 * that graph's own memory, so that a replay finds it where the capture put
 * it. Valid until the next call for s. */
brisk_status brisk_cuda_scratch(cuda_backend *cb, scratch *s, size_t bytes, void **out);
/* Copies n host arrays to device memory, each 16-byte aligned; dev[i]
 * receives the device address of src[i]'s copy. */
brisk_status brisk_cuda_mirror(cuda_backend *cb, int n, const void *const *src, const size_t *bytes,
                               void **dev);

/* cuda_gemm.c */
void brisk_cuda_gemm_init(cuda_backend *cb);
void brisk_cuda_gemm_fini(cuda_backend *cb);
/* True when a matmul of m rows of base-type weights takes the GEMM path. */
bool brisk_cuda_gemm_wanted(const cuda_backend *cb, uint32_t base, int64_t m);
brisk_status brisk_cuda_gemm_matmul(cuda_backend *cb, uint32_t base, const void *w, int64_t n,
                                    int64_t k, const float *x, int64_t m, float *y);

/* cuda_graph.c */
void brisk_cuda_graph_init(cuda_backend *cb);
void brisk_cuda_graph_fini(cuda_backend *cb);
/* True between step_begin and step_end of a step being captured. */
bool brisk_cuda_graph_capturing(const cuda_backend *cb);
/* While capturing: frees p once the step has run. */
brisk_status brisk_cuda_graph_defer_free(cuda_backend *cb, void *p);
/* Queues a copy of host memory to the device; src may be reused when it
 * returns (while capturing it goes through page-locked staging). */
brisk_status brisk_cuda_h2d(cuda_backend *cb, void *dst, const void *src, size_t bytes,
                            const char *what);

/* cuda_mla.c: backend.h's mla_kv_write and mla_attention. */
brisk_status brisk_cuda_mla_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                     void *v_cache, const float *latent, const float *k_rope,
                                     const int64_t *slots, int32_t n_tokens,
                                     const brisk_mla_params *params);
brisk_status brisk_cuda_mla_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                      const void *k_cache, const void *v_cache, const float *q,
                                      const float *kv_b, const brisk_attn_batch *b,
                                      const brisk_mla_params *params, float *out);

/* The short names cuda_backend.c's operations use. */
static inline brisk_status rt_status(cuda_backend *cb, int e, const char *what) {
  return brisk_cuda_status(cb, e, what);
}
static inline brisk_status launched(cuda_backend *cb, int e, const char *kernel) {
  return brisk_cuda_launched(cb, e, kernel);
}
static inline brisk_status mirror(cuda_backend *cb, int n, const void *const *src,
                                  const size_t *bytes, void **dev) {
  return brisk_cuda_mirror(cb, n, src, bytes, dev);
}

#endif
