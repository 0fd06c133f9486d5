/* The CUDA runtime behind brisk_cuda_rt (cuda_rt.h), for the plugin. */
#include "backend/cuda/rt_cudart.h"

#include <cuda_runtime_api.h>

static int set_device(int d) { return (int)cudaSetDevice(d); }
static int dev_malloc(void **p, size_t n) { return (int)cudaMalloc(p, n); }
static int dev_free(void *p) { return (int)cudaFree(p); }

static int memcpy_async(void *dst, const void *src, size_t n, brisk_cuda_copy kind, void *s) {
  enum cudaMemcpyKind k = kind == BRISK_CUDA_H2D   ? cudaMemcpyHostToDevice
                          : kind == BRISK_CUDA_D2H ? cudaMemcpyDeviceToHost
                                                   : cudaMemcpyDeviceToDevice;
  return (int)cudaMemcpyAsync(dst, src, n, k, (cudaStream_t)s);
}

static int memset_async(void *dst, int v, size_t n, void *s) {
  return (int)cudaMemsetAsync(dst, v, n, (cudaStream_t)s);
}

static int stream_create(void **s) {
  return (int)cudaStreamCreateWithFlags((cudaStream_t *)s, cudaStreamNonBlocking);
}
static int stream_destroy(void *s) { return (int)cudaStreamDestroy((cudaStream_t)s); }
static int stream_sync(void *s) { return (int)cudaStreamSynchronize((cudaStream_t)s); }
static const char *error_string(int e) { return cudaGetErrorString((cudaError_t)e); }
static bool is_oom(int e) { return e == (int)cudaErrorMemoryAllocation; }

const brisk_cuda_rt brisk_cuda_rt_cudart = {
    "cuda",        set_device,     dev_malloc,  dev_free,     memcpy_async, memset_async,
    stream_create, stream_destroy, stream_sync, error_string, is_oom,
};
