/* cuBLASLt for the runtime table's GEMM entries (rt_cublaslt.c): the
 * plugin's brisk_cuda_rt points its gemm_* entries here. Errors are
 * BRISK_CUDA_GEMM_ERROR_BASE + the cuBLAS status, so that one int space
 * holds the runtime's codes and these; BRISK_CUDA_GEMM_NO_LIBRARY means
 * libcublasLt could not be opened. */
#ifndef BRISK_BACKEND_CUDA_RT_CUBLASLT_H
#define BRISK_BACKEND_CUDA_RT_CUBLASLT_H

#include "backend/cuda/cuda_rt.h"

#define BRISK_CUDA_GEMM_ERROR_BASE 100000
#define BRISK_CUDA_GEMM_NO_LIBRARY 999

int brisk_cuda_gemm_open(void **handle);
void brisk_cuda_gemm_close(void *handle);
int brisk_cuda_gemm_plan(void *handle, const brisk_cuda_gemm_shape *shape, size_t workspace_bytes,
                         void **plan);
void brisk_cuda_gemm_plan_free(void *plan);
int brisk_cuda_gemm_run(void *handle, const void *plan, const void *a, const void *b, float *c,
                        void *workspace, size_t workspace_bytes, void *stream);
const char *brisk_cuda_gemm_error_string(int error);
bool brisk_cuda_gemm_is_oom(int error);

#endif
