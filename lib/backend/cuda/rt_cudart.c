/* The CUDA runtime behind brisk_cuda_rt (cuda_rt.h), for the plugin. */
#include "backend/cuda/rt_cudart.h"

#include "backend/cuda/rt_cublaslt.h"

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
static const char *error_string(int e) {
  return e >= BRISK_CUDA_GEMM_ERROR_BASE ? brisk_cuda_gemm_error_string(e)
                                         : cudaGetErrorString((cudaError_t)e);
}
static bool is_oom(int e) {
  return e == (int)cudaErrorMemoryAllocation || brisk_cuda_gemm_is_oom(e);
}

static int host_alloc(void **p, size_t n) { return (int)cudaHostAlloc(p, n, cudaHostAllocDefault); }
static int host_free(void *p) { return (int)cudaFreeHost(p); }

static int capture_begin(void *s) {
  return (int)cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeRelaxed);
}
static int capture_end(void *s, void **g) {
  return (int)cudaStreamEndCapture((cudaStream_t)s, (cudaGraph_t *)g);
}
static int graph_instantiate(void *g, void **e) {
  return (int)cudaGraphInstantiate((cudaGraphExec_t *)e, (cudaGraph_t)g, 0);
}
static int graph_update(void *e, void *g) {
  cudaGraphExecUpdateResultInfo info;
  cudaError_t r = cudaGraphExecUpdate((cudaGraphExec_t)e, (cudaGraph_t)g, &info);
  if (r != cudaSuccess) (void)cudaGetLastError(); /* not sticky: the caller instantiates */
  return (int)r;
}
static int graph_launch(void *e, void *s) {
  return (int)cudaGraphLaunch((cudaGraphExec_t)e, (cudaStream_t)s);
}
static void graph_free(void *g) { (void)cudaGraphDestroy((cudaGraph_t)g); }
static void graph_exec_free(void *e) { (void)cudaGraphExecDestroy((cudaGraphExec_t)e); }

const brisk_cuda_rt brisk_cuda_rt_cudart = {
    .name = "cuda",
    .set_device = set_device,
    .malloc = dev_malloc,
    .free = dev_free,
    .memcpy_async = memcpy_async,
    .memset_async = memset_async,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_sync = stream_sync,
    .error_string = error_string,
    .is_oom = is_oom,
    .gemm_open = brisk_cuda_gemm_open,
    .gemm_close = brisk_cuda_gemm_close,
    .gemm_plan = brisk_cuda_gemm_plan,
    .gemm_plan_free = brisk_cuda_gemm_plan_free,
    .gemm_run = brisk_cuda_gemm_run,
    /* cuBLAS's advice for Hopper; ample for Ampere and Ada. */
    .gemm_workspace_bytes = (size_t)32 << 20,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .capture_begin = capture_begin,
    .capture_end = capture_end,
    .graph_instantiate = graph_instantiate,
    .graph_update = graph_update,
    .graph_launch = graph_launch,
    .graph_free = graph_free,
    .graph_exec_free = graph_exec_free,
};
