/* libbrisk-cuda.so: the CUDA device plugin (backend/plugin.h).
 *
 * It links the CUDA runtime statically, so that it needs nothing from the
 * CUDA toolkit at run time but the driver (libcuda.so.1), which the runtime
 * opens itself: no driver is then an error status, not a failed dlopen.
 * Every runtime error becomes a status with the runtime's message, through
 * the host table, so it reaches brisk_last_error. The backend it creates is
 * cuda_backend.c over the kernels of kernels/ built by nvcc. */
#include "backend/plugin.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/host_shim.h"
#include "backend/cuda/rt_cudart.h"
#ifdef BRISK_PLUGIN_NCCL
#  include "backend/cuda/rt_nccl.h"
#endif
#include "brisk_config.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const brisk_plugin_host *host;

static brisk_status fail(brisk_status st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return host->error(st, msg);
}

/* A runtime error as a status: a missing driver or device is
 * BRISK_E_NO_DEVICE, memory is BRISK_E_OUT_OF_MEMORY. */
static brisk_status cuda_fail(cudaError_t e, const char *what) {
  brisk_status st = BRISK_E_INTERNAL;
  const char *hint = "";
  switch (e) {
  case cudaErrorNoDevice:
    st = BRISK_E_NO_DEVICE;
    hint = " (no CUDA device on this machine)";
    break;
  case cudaErrorInsufficientDriver:
    st = BRISK_E_NO_DEVICE;
    hint = " (the NVIDIA driver is missing or older than this build's CUDA runtime)";
    break;
  case cudaErrorInvalidDevice: st = BRISK_E_NO_DEVICE; break;
  case cudaErrorMemoryAllocation: st = BRISK_E_OUT_OF_MEMORY; break;
  default: break;
  }
  return fail(st, "CUDA driver: %s: %s%s", what, cudaGetErrorString(e), hint);
}

static brisk_status count(const brisk_device_provider *p, int32_t *n) {
  (void)p;
  int c = 0;
  cudaError_t e = cudaGetDeviceCount(&c);
  *n = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: clear it */
    return cuda_fail(e, "cudaGetDeviceCount");
  }
  *n = c;
  return BRISK_OK;
}

static brisk_status info(const brisk_device_provider *p, int32_t index, brisk_device_props *out) {
  (void)p;
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceProperties");
  out->kind = BRISK_DEVICE_CUDA;
  out->index = index;
  snprintf(out->id, sizeof out->id, "cuda:%d", (int)index);
  snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof out->name - 1, prop.name);
  out->compute_major = prop.major;
  out->compute_minor = prop.minor;
  out->total_memory = prop.totalGlobalMem;
  out->free_memory = 0;
  int prev = 0;
  size_t free_b = 0, total_b = 0;
  if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(index) == cudaSuccess &&
      cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    out->free_memory = free_b;
  (void)cudaSetDevice(prev);
  (void)cudaGetLastError();
  return BRISK_OK;
}

static brisk_status create(const brisk_device_provider *p, int32_t index, brisk_threadpool *pool,
                           brisk_backend **out) {
  (void)p;
  (void)pool;
  char name[32];
  snprintf(name, sizeof name, "cuda:%d", (int)index);
  return brisk_backend_cuda_create(&brisk_cuda_rt_cudart, index, name, out);
}

__attribute__((visibility("default"))) brisk_status
brisk_plugin_entry_v1(const brisk_plugin_host *h, brisk_plugin_api *api);

brisk_status brisk_plugin_entry_v1(const brisk_plugin_host *h, brisk_plugin_api *api) {
  if (!h || !api || h->abi != BRISK_PLUGIN_ABI) return BRISK_E_INVALID_ARGUMENT;
  host = h;
  brisk_plugin_shim_init(h);
  memset(api, 0, sizeof *api);
  api->abi = BRISK_PLUGIN_ABI;
  api->version = BRISK_VERSION_STRING;
  api->provider = (brisk_device_provider){
      .kind_name = "cuda",
      .kind = BRISK_DEVICE_CUDA,
      .count = count,
      .info = info,
      .create = create,
  };
#ifdef BRISK_PLUGIN_NCCL
  api->nccl = &brisk_nccl_rt_cuda;
#endif
  return BRISK_OK;
}
