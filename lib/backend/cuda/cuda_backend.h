/* The CUDA backend: backend.h's operation table over the kernels in
 * kernels/, on one device and one stream. The same code runs over the CUDA
 * runtime (in libbrisk-cuda.so) and over the SIMT emulation (in the test
 * suite), through the runtime table of cuda_rt.h.
 *
 * Weights are copied at load into the regrouped layouts of
 * kernels/regroup.h (weight_plan: COPY); metadata the operations take in
 * host memory (token ids, positions, slots, block tables, copy pairs, RoPE
 * frequencies) is mirrored into device scratch on the stream before each
 * launch. Every runtime error is a status: out of device memory is
 * BRISK_E_OUT_OF_MEMORY with the backend still usable, anything else
 * BRISK_E_INTERNAL naming the call and the runtime's message. */
#ifndef BRISK_BACKEND_CUDA_CUDA_BACKEND_H
#define BRISK_BACKEND_CUDA_CUDA_BACKEND_H

#include "backend/backend.h"
#include "backend/cuda/cuda_rt.h"

/* A backend on `device` of runtime `rt` (borrowed, static). name: e.g.
 * "cuda:0". */
brisk_status brisk_backend_cuda_create(const brisk_cuda_rt *rt, int device, const char *name,
                                       brisk_backend **out);

/* The GEMM path's threshold (matmuls of at least min_rows rows take it; 0:
 * none) and the bound on one dequantized weight tile (0: keep it), for
 * tests and benchmarks; cuda_gemm.c has the defaults. */
void brisk_backend_cuda_set_gemm(brisk_backend *be, int64_t min_rows, size_t tile_bytes);
/* Matmuls that have taken the GEMM path so far. */
uint64_t brisk_backend_cuda_gemm_calls(const brisk_backend *be);

/* Decode steps as graphs (cuda_graph.c). */
typedef struct brisk_cuda_graph_stats {
  uint64_t steps;        /* steps run as a graph */
  uint64_t instantiated; /* graphs made executable: a new bucket or a changed topology */
  uint64_t updated;      /* steps that reused their bucket's graph, updated in place */
  uint64_t eager;        /* bracketed steps run without a graph (too large, graphs off) */
} brisk_cuda_graph_stats;
void brisk_backend_cuda_graph_stats(const brisk_backend *be, brisk_cuda_graph_stats *out);
/* Steps of up to max_batch tokens are graphed; 0: none. */
brisk_status brisk_backend_cuda_set_graphs(brisk_backend *be, int32_t max_batch);

#endif
