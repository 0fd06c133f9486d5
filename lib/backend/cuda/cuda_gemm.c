/* The tensor-core path of the CUDA backend's matmul (cuda_priv.h), for
 * calls of many rows: prefill chunks and large batches.
 *
 *   x (F32)  --brisk_kcast_f32-->  xs [m][k] in the compute type
 *   for each tile of weight rows [r0, r0 + nr):
 *     W rows --brisk_kdequant_tile-->  tile [nr][k] in the compute type
 *     y[:, r0 .. r0 + nr) = xs . tile^T        (rt->gemm_run: cuBLASLt)
 *
 * The compute type is F16 for F16 weights (exact) and BF16 for every other
 * type (BF16 exact; quantized weights rounded once, in the F32 range that
 * activations need). A tile holds at most gemm_tile_bytes (a multiple of
 * 128 rows, at least 128), so no whole matrix is ever dequantized: the
 * memory this path holds is xs, one tile and the library's workspace. All
 * of it is ordered on the backend's one stream, so one tile buffer serves
 * every tile. F32 weights stay on the GEMV kernels.
 *
 * The threshold is per call: m >= gemm_min_rows (default 32, the
 * BRISK_CUDA_GEMM_ROWS environment variable overrides it, 0 turns the path
 * off). What then holds for batch invariance is in docs/cuda.md. */
#include "backend/cuda/cuda_priv.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "matmul.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_MIN_ROWS 32
#define DEFAULT_TILE_BYTES ((size_t)32 << 20)

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

void brisk_cuda_gemm_init(cuda_backend *cb) {
  cb->gemm_min_rows = DEFAULT_MIN_ROWS;
  cb->gemm_tile_bytes = DEFAULT_TILE_BYTES;
  const char *env = getenv("BRISK_CUDA_GEMM_ROWS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0)
      BRISK_WARN("%s: BRISK_CUDA_GEMM_ROWS=%s is not a row count; using %d", cb->name, env,
                 DEFAULT_MIN_ROWS);
    else
      cb->gemm_min_rows = v;
  }
  if (!cb->rt->gemm_open) return;
  void *h = NULL;
  int e = cb->rt->gemm_open(&h);
  if (e) {
    BRISK_INFO("%s: no GEMM library (%s): every matmul runs on the GEMV kernels", cb->name,
               cb->rt->error_string(e));
    return;
  }
  cb->gemm = h;
}

void brisk_cuda_gemm_fini(cuda_backend *cb) {
  for (int i = 0; i < CUDA_GEMM_PLANS; i++)
    if (cb->plans[i].plan) cb->rt->gemm_plan_free(cb->plans[i].plan);
  memset(cb->plans, 0, sizeof cb->plans);
  if (cb->gemm) cb->rt->gemm_close(cb->gemm);
  cb->gemm = NULL;
}

bool brisk_cuda_gemm_wanted(const cuda_backend *cb, uint32_t base, int64_t m) {
  return cb->gemm && cb->gemm_min_rows > 0 && m >= cb->gemm_min_rows && base != BRISK_DTYPE_F32;
}

static bool same_shape(const brisk_cuda_gemm_shape *a, const brisk_cuda_gemm_shape *b) {
  return a->type == b->type && a->m == b->m && a->n == b->n && a->k == b->k && a->ldc == b->ldc;
}

/* A plan for the shape, from the cache or new (the oldest slot makes room:
 * prefill chunks repeat few shapes). */
static brisk_status plan_for(cuda_backend *cb, const brisk_cuda_gemm_shape *s, void **out) {
  for (int i = 0; i < CUDA_GEMM_PLANS; i++)
    if (cb->plans[i].plan && same_shape(&cb->plans[i].shape, s)) {
      *out = cb->plans[i].plan;
      return BRISK_OK;
    }
  void *p = NULL;
  brisk_status st = brisk_cuda_status(
      cb, cb->rt->gemm_plan(cb->gemm, s, cb->rt->gemm_workspace_bytes, &p), "GEMM plan");
  if (st) return st;
  gemm_plan_slot *slot = &cb->plans[cb->next_plan];
  cb->next_plan = (cb->next_plan + 1) % CUDA_GEMM_PLANS;
  if (slot->plan) cb->rt->gemm_plan_free(slot->plan);
  *slot = (gemm_plan_slot){*s, p};
  *out = p;
  return BRISK_OK;
}

brisk_status brisk_cuda_gemm_matmul(cuda_backend *cb, uint32_t base, const void *w, int64_t n,
                                    int64_t k, const float *x, int64_t m, float *y) {
  const uint32_t ct = base == BRISK_DTYPE_F16 ? BRISK_DTYPE_F16 : BRISK_DTYPE_BF16;
  const size_t row = (size_t)k * 2;
  int64_t rows = (int64_t)(cb->gemm_tile_bytes / row) / 128 * 128;
  if (rows < 128) rows = 128;
  if (rows > n) rows = n;
  /* Sizes are bounded by the checked m x k and n x k of the caller. */
  const size_t xs_bytes = align256((size_t)m * row), tile_bytes = align256((size_t)rows * row);
  const size_t ws = cb->rt->gemm_workspace_bytes;
  void *buf = NULL;
  brisk_status st = brisk_cuda_scratch(cb, &cb->gemm_buf, xs_bytes + tile_bytes + ws, &buf);
  if (st) return st;
  void *xs = buf, *tile = (char *)buf + xs_bytes, *wsp = ws ? (char *)tile + tile_bytes : NULL;
  if ((st = brisk_cuda_launched(cb, brisk_kcast_f32(ct, x, m * k, xs, cb->stream),
                                "matmul (activation cast)")))
    return st;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t nr = n - r0 < rows ? n - r0 : rows;
    const brisk_cuda_gemm_shape shape = {ct, m, nr, k, n};
    void *plan = NULL;
    if ((st = brisk_cuda_launched(cb,
                                  brisk_kdequant_tile(base, w, n, k, r0, nr, ct, tile, cb->stream),
                                  "matmul (weight tile)")) ||
        (st = plan_for(cb, &shape, &plan)) ||
        (st = brisk_cuda_status(
             cb, cb->rt->gemm_run(cb->gemm, plan, xs, tile, y + r0, wsp, ws, cb->stream), "GEMM")))
      return st;
  }
  cb->gemm_calls++;
  return BRISK_OK;
}

void brisk_backend_cuda_set_gemm(brisk_backend *be, int64_t min_rows, size_t tile_bytes) {
  cuda_backend *cb = (cuda_backend *)be;
  cb->gemm_min_rows = min_rows;
  if (tile_bytes) cb->gemm_tile_bytes = tile_bytes;
}

uint64_t brisk_backend_cuda_gemm_calls(const brisk_backend *be) {
  return ((const cuda_backend *)be)->gemm_calls;
}
