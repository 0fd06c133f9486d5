/* The runtime table (lib/backend/cuda/cuda_rt.h) over the SIMT emulation:
 * device memory is host memory, a stream is a token, every call completes
 * before it returns. A device-memory limit makes allocations fail the way
 * cudaMalloc does, so tests reach the backend's out-of-memory paths. */
#include "cuda_emu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { EMU_OOM = 2 /* cudaErrorMemoryAllocation */, EMU_INVALID = 1 /* cudaErrorInvalidValue */ };

static size_t limit = SIZE_MAX, in_use;

/* Each allocation carries its size in front, for the limit. */
#define HEADER 256

void brisk_cuda_emu_set_limit(size_t bytes) { limit = bytes; }
size_t brisk_cuda_emu_in_use(void) { return in_use; }

static int set_device(int d) { return d == 0 ? 0 : 101 /* cudaErrorInvalidDevice */; }

static int emu_malloc(void **p, size_t n) {
  if (n > limit || in_use > limit - n) return EMU_OOM;
  unsigned char *b = aligned_alloc(HEADER, (n + HEADER + HEADER - 1) / HEADER * HEADER);
  if (!b) return EMU_OOM;
  memcpy(b, &n, sizeof n);
  in_use += n;
  *p = b + HEADER;
  return 0;
}

static int emu_free(void *p) {
  if (!p) return 0;
  unsigned char *b = (unsigned char *)p - HEADER;
  size_t n;
  memcpy(&n, b, sizeof n);
  in_use -= n;
  free(b);
  return 0;
}

static int emu_memcpy(void *dst, const void *src, size_t n, brisk_cuda_copy kind, void *s) {
  (void)kind;
  (void)s;
  if (n && (!dst || !src)) return EMU_INVALID;
  memmove(dst, src, n);
  return 0;
}

static int emu_memset(void *dst, int v, size_t n, void *s) {
  (void)s;
  if (n && !dst) return EMU_INVALID;
  memset(dst, v, n);
  return 0;
}

static char stream_token;
static int stream_create(void **s) {
  *s = &stream_token;
  return 0;
}
static int stream_destroy(void *s) { return s == &stream_token ? 0 : EMU_INVALID; }
static int stream_sync(void *s) { return s == &stream_token ? 0 : EMU_INVALID; }

static const char *error_string(int e) {
  switch (e) {
  case EMU_OOM: return "out of memory (emulated device)";
  case EMU_INVALID: return "invalid argument (emulated device)";
  case 101: return "invalid device ordinal (emulated device)";
  default: return "emulated kernel error";
  }
}

static bool is_oom(int e) { return e == EMU_OOM; }

const brisk_cuda_rt brisk_cuda_rt_emu = {
    "cuda-emu",    set_device,     emu_malloc,  emu_free,     emu_memcpy, emu_memset,
    stream_create, stream_destroy, stream_sync, error_string, is_oom,
};
