/* The runtime table (lib/backend/cuda/cuda_rt.h) over the SIMT emulation:
 * device memory is host memory, a stream is a token, every call completes
 * before it returns. A device-memory limit makes allocations fail the way
 * cudaMalloc does, so tests reach the backend's out-of-memory paths. */
#include "cuda_emu.h"

#include "matmul.h"
#include "simt_graph.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
  EMU_OOM = 2,       /* cudaErrorMemoryAllocation */
  EMU_INVALID = 1,   /* cudaErrorInvalidValue */
  EMU_CAPTURE = 900, /* cudaErrorStreamCaptureUnsupported */
};

/* Atomic: the NCCL test's ranks allocate from several threads at once.
 * Up to BRISK_CUDA_EMU_MAX_DEVICES devices, each with its own count and
 * limit, selected per thread as cudaSetDevice does; `limit` caps them all
 * together. */
static size_t limit = SIZE_MAX;
static atomic_size_t in_use;
static size_t dev_limit[BRISK_CUDA_EMU_MAX_DEVICES] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX,
                                                       SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
static atomic_size_t dev_in_use[BRISK_CUDA_EMU_MAX_DEVICES];
static __thread int current_device;

/* Each allocation carries its size and device in front, for the limits. */
#define HEADER 256

void brisk_cuda_emu_set_limit(size_t bytes) { limit = bytes; }
size_t brisk_cuda_emu_in_use(void) { return atomic_load(&in_use); }
void brisk_cuda_emu_set_device_limit(int device, size_t bytes) {
  if (device >= 0 && device < BRISK_CUDA_EMU_MAX_DEVICES) dev_limit[device] = bytes;
}
size_t brisk_cuda_emu_device_in_use(int device) {
  return device >= 0 && device < BRISK_CUDA_EMU_MAX_DEVICES ? atomic_load(&dev_in_use[device]) : 0;
}

static int set_device(int d) {
  if (d < 0 || d >= BRISK_CUDA_EMU_MAX_DEVICES) return 101; /* cudaErrorInvalidDevice */
  current_device = d;
  return 0;
}

static int emu_malloc(void **p, size_t n) {
  const int d = current_device;
  if (n > limit || atomic_load(&in_use) > limit - n || n > dev_limit[d] ||
      atomic_load(&dev_in_use[d]) > dev_limit[d] - n)
    return EMU_OOM;
  unsigned char *b = aligned_alloc(HEADER, (n + HEADER + HEADER - 1) / HEADER * HEADER);
  if (!b) return EMU_OOM;
  memcpy(b, &n, sizeof n);
  memcpy(b + sizeof n, &d, sizeof d);
  atomic_fetch_add(&in_use, n);
  atomic_fetch_add(&dev_in_use[d], n);
  *p = b + HEADER;
  return 0;
}

static int emu_free(void *p) {
  if (!p) return 0;
  unsigned char *b = (unsigned char *)p - HEADER;
  size_t n;
  int d;
  memcpy(&n, b, sizeof n);
  memcpy(&d, b + sizeof n, sizeof d);
  atomic_fetch_sub(&in_use, n);
  atomic_fetch_sub(&dev_in_use[d], n);
  free(b);
  return 0;
}

static int emu_memcpy(void *dst, const void *src, size_t n, brisk_cuda_copy kind, void *s) {
  (void)kind;
  (void)s;
  if (n && (!dst || !src)) return EMU_INVALID;
  if (brisk_simt_capturing()) return brisk_simt_capture_copy(dst, src, n);
  memmove(dst, src, n);
  return 0;
}

static int emu_memset(void *dst, int v, size_t n, void *s) {
  (void)s;
  if (n && !dst) return EMU_INVALID;
  if (brisk_simt_capturing()) return brisk_simt_capture_fill(dst, v, n);
  memset(dst, v, n);
  return 0;
}

static char stream_token;
static int stream_create(void **s) {
  *s = &stream_token;
  return 0;
}
static int stream_destroy(void *s) { return s == &stream_token ? 0 : EMU_INVALID; }
/* As on CUDA, a capturing stream cannot be waited for. */
static int stream_sync(void *s) {
  if (s != &stream_token) return EMU_INVALID;
  return brisk_simt_capturing() ? EMU_CAPTURE : 0;
}

static const char *error_string(int e) {
  switch (e) {
  case EMU_OOM: return "out of memory (emulated device)";
  case EMU_INVALID: return "invalid argument (emulated device)";
  case 101: return "invalid device ordinal (emulated device)";
  case EMU_CAPTURE: return "operation not permitted when stream is capturing (emulated device)";
  case 910: return "the graph update was not performed (emulated device)";
  default: return "emulated kernel error";
  }
}

static bool is_oom(int e) { return e == EMU_OOM; }

/* The GEMM twin: a plan is its shape, a product is brisk_kgemm (the SIMT
 * GEMM with cuBLASLt's contract: F16 or BF16 operands, F32 accumulation),
 * fed by the same activation cast and weight tiles as on the GPU. */
static char gemm_token;
static int gemm_open(void **h) {
  *h = &gemm_token;
  return 0;
}
static void gemm_close(void *h) { (void)h; }

static int gemm_plan(void *h, const brisk_cuda_gemm_shape *s, size_t ws, void **plan) {
  (void)ws;
  if (h != &gemm_token || s->m < 1 || s->n < 1 || s->k < 1 || s->ldc < s->n) return EMU_INVALID;
  brisk_cuda_gemm_shape *p = malloc(sizeof *p);
  if (!p) return EMU_OOM;
  *p = *s;
  *plan = p;
  return 0;
}
static void gemm_plan_free(void *plan) { free(plan); }

static int gemm_run(void *h, const void *plan, const void *a, const void *b, float *c, void *ws,
                    size_t ws_bytes, void *stream) {
  (void)ws;
  (void)ws_bytes;
  const brisk_cuda_gemm_shape *s = plan;
  if (h != &gemm_token || !a || !b || !c) return EMU_INVALID;
  return brisk_kgemm(s->type, a, s->type, b, s->m, s->n, s->k, c, s->ldc, stream);
}

/* The graph twin (tests/simt/simt_graph.h). Page-locked memory is plain
 * host memory counted apart from the device's. */
static size_t pinned_in_use;
size_t brisk_cuda_emu_pinned_in_use(void) { return pinned_in_use; }

static int host_alloc(void **p, size_t n) {
  unsigned char *b = malloc(n + 16);
  if (!b) return EMU_OOM;
  memcpy(b, &n, sizeof n);
  pinned_in_use += n;
  *p = b + 16;
  return 0;
}
static int host_free(void *p) {
  if (!p) return 0;
  unsigned char *b = (unsigned char *)p - 16;
  size_t n;
  memcpy(&n, b, sizeof n);
  pinned_in_use -= n;
  free(b);
  return 0;
}

static int capture_begin(void *s) {
  if (s != &stream_token) return EMU_INVALID;
  return brisk_simt_capture_begin() ? EMU_INVALID : 0;
}
static int capture_end(void *s, void **g) {
  if (s != &stream_token) return EMU_INVALID;
  return brisk_simt_capture_end((brisk_simt_graph **)g) ? EMU_INVALID : 0;
}
static uint64_t n_instantiated, n_updated, n_launched;
void brisk_cuda_emu_graph_counts(uint64_t *instantiated, uint64_t *updated, uint64_t *launched) {
  *instantiated = n_instantiated;
  *updated = n_updated;
  *launched = n_launched;
}

static int graph_instantiate(void *g, void **e) {
  if (brisk_simt_graph_instantiate(g, (brisk_simt_graph **)e)) return EMU_OOM;
  n_instantiated++;
  return 0;
}
static int graph_update(void *e, void *g) {
  int st = brisk_simt_graph_update(e, g);
  if (!st) n_updated++;
  return st;
}
static int graph_launch(void *e, void *s) {
  if (s != &stream_token || brisk_simt_capturing()) return EMU_INVALID;
  n_launched++;
  return brisk_simt_graph_launch(e);
}
static void graph_free(void *g) { brisk_simt_graph_free(g); }

const brisk_cuda_rt brisk_cuda_rt_emu = {
    .name = "cuda-emu",
    .set_device = set_device,
    .malloc = emu_malloc,
    .free = emu_free,
    .memcpy_async = emu_memcpy,
    .memset_async = emu_memset,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_sync = stream_sync,
    .error_string = error_string,
    .is_oom = is_oom,
    .gemm_open = gemm_open,
    .gemm_close = gemm_close,
    .gemm_plan = gemm_plan,
    .gemm_plan_free = gemm_plan_free,
    .gemm_run = gemm_run,
    .gemm_workspace_bytes = 0,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .capture_begin = capture_begin,
    .capture_end = capture_end,
    .graph_instantiate = graph_instantiate,
    .graph_update = graph_update,
    .graph_launch = graph_launch,
    .graph_free = graph_free,
    .graph_exec_free = graph_free,
};
