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

#endif
