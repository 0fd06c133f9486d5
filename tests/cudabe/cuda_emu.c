/* The "cudaemu" device kind (cuda_emu.h). */
#include "cuda_emu.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/device.h"
#include "nccl_emu.h"

#include <stdio.h>

static int n_devices = 1;

void brisk_cuda_emu_set_device_count(int n) {
  n_devices = n < 1 ? 1 : n > BRISK_CUDA_EMU_MAX_DEVICES ? BRISK_CUDA_EMU_MAX_DEVICES : n;
}

static brisk_status count(const brisk_device_provider *p, int32_t *n) {
  (void)p;
  *n = n_devices;
  return BRISK_OK;
}

static brisk_status info(const brisk_device_provider *p, int32_t index, brisk_device_props *out) {
  (void)p;
  out->kind = BRISK_DEVICE_CUDA;
  out->index = index;
  snprintf(out->id, sizeof out->id, "cudaemu:%d", (int)index);
  snprintf(out->name, sizeof out->name, "SIMT emulation of a CUDA device");
  out->total_memory = out->free_memory = 0;
  out->compute_major = 9;
  out->compute_minor = 0;
  return BRISK_OK;
}

static brisk_status create(const brisk_device_provider *p, int32_t index, brisk_threadpool *pool,
                           brisk_backend **out) {
  (void)p;
  (void)pool;
  char name[32];
  snprintf(name, sizeof name, "cudaemu:%d", (int)index);
  return brisk_backend_cuda_create(&brisk_cuda_rt_emu, index, name, out);
}

static const brisk_device_provider provider = {
    .kind_name = "cudaemu",
    .kind = BRISK_DEVICE_CUDA,
    .count = count,
    .info = info,
    .create = create,
};

brisk_status brisk_cuda_emu_register(void) {
  static int done;
  if (done) return BRISK_OK;
  brisk_status st = brisk_device_register(&provider);
  /* Tensor parallelism over these devices communicates through the
   * emulated NCCL. */
  if (!st) st = brisk_device_set_nccl(&provider, &brisk_nccl_rt_emu);
  if (!st) done = 1;
  return st;
}
