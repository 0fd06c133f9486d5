/* The matmul driver: argument checks, activation quantization into the
 * workspace, and the split of the output into tile-kernel calls across tasks.
 * The kernels are in mm_scalar.c and mm_avx2_*.c. */
#include "backend/cpu/matmul/matmul.h"

#include "backend/cpu/matmul/mm_internal.h"
#include "backend/cpu/matmul/pack.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"

#include <stdatomic.h>
#include <string.h>

#define WS_ALIGN 64
_Static_assert(BRISK_MM_WIDE_W == BRISK_PACK_ROWS, "GEMV/GEMM row groups are packed groups");
/* GEMM tiles: activation rows of a tile fit in about half of a 512 KiB L2,
 * weight rows in about 64 KiB, so a tile's weights stay in L1/L2 while all
 * of its activation rows pass by. */
#define TILE_X_BYTES (256 * 1024)
#define TILE_W_BYTES (64 * 1024)
#define GEMV_MAX_M BRISK_MM_MAX_X
/* Float-weight GEMM: k is walked in chunks so that 4 activation rows
 * (4 x 2 KiB) stay in L1 while up to FTILE_W weight rows stream from L2;
 * without it the kernels wait on L2 for the activations. */
#define FCHUNK_K 512 /* a multiple of 16: the AVX-512 chunk kernels' step */
#define FTILE_W 32
#define FTILE_X 32

/* The process-wide cap of the hooks below; -1: brisk_cpu_isa_level(). */
static _Atomic int isa_cap = -1;

void brisk_cpu_matmul_set_isa(brisk_isa_level level) { atomic_store(&isa_cap, (int)level); }
void brisk_cpu_matmul_force_scalar(bool force) {
  atomic_store(&isa_cap, force ? (int)BRISK_ISA_SCALAR : -1);
}

brisk_isa_level brisk_cpu_matmul_isa(void) {
  brisk_isa_level l = brisk_cpu_isa_level();
  const int cap = atomic_load(&isa_cap);
  if (cap >= 0 && cap < (int)l) l = (brisk_isa_level)cap;
  /* A build without the kernels of the processor's family has only the
   * scalar ones. */
  if (brisk_isa_is_neon(l) ? brisk_mm_neon_tile(BRISK_DTYPE_F32, BRISK_ISA_NEON) == NULL
                           : l > BRISK_ISA_SCALAR && brisk_mm_avx2_tile(BRISK_DTYPE_F32) == NULL)
    l = BRISK_ISA_SCALAR;
  return l;
}

bool brisk_cpu_matmul_uses_avx2(void) { return brisk_cpu_matmul_isa() >= BRISK_ISA_AVX2; }

typedef struct mm_job {
  brisk_mm_tile_fn tile;
  brisk_mm_chunk_fn chunk; /* float-weight GEMM, when the kernels have it */
  int chunk_lanes;         /* floats per output in the chunk kernels' accumulators: 8 or 16 */
  int chunk_w;             /* weight rows per chunk-kernel call, at most: 2 or 4 */
  bool wide;               /* tile takes up to BRISK_MM_WIDE_W weight rows */
  brisk_mm_tile_fn packed; /* packed weights: the kernel for whole groups of 8 rows */
  int packed_gemm_w;       /* weight rows per packed tile with several activation rows */
  int64_t n_packed;        /* rows in whole packed groups; `tile` takes the rest (base layout) */
  brisk_mm_act_fn act;     /* NULL: x is used as given */
  const uint8_t *w;        /* [n][w_stride] */
  size_t w_stride;         /* bytes per weight row */
  const float *x;          /* [m][k] */
  const uint8_t *xa;       /* [m][xa_stride]: x itself or its quantized rows */
  uint8_t *xq;             /* the quantized rows (workspace), when act != NULL */
  size_t xa_stride;        /* bytes */
  float *y;                /* [m][n] */
  int64_t n, k, m;
  int64_t act_rows; /* activation rows per quantization task */
  int64_t w_rows;   /* weight rows per task (GEMV) or per tile (GEMM) */
  int64_t x_rows;   /* activation rows per tile (GEMM) */
  int64_t n_wtiles; /* ceil(n / w_rows) */
} mm_job;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Weight rows of the tile call at column c (of a block ending at c1) with
 * n_x activation rows. Packed groups start at multiples of 8 (task and tile
 * bounds are): whole groups, up to BRISK_MM_R8_GEMV_GROUPS for one
 * activation row and packed_gemm_w rows for more. Otherwise four weight
 * rows give a single activation row enough independent accumulator chains;
 * with more activation rows two suffice. */
static int tile_rows(const mm_job *j, int64_t c, int64_t c1, int64_t n_x) {
  const int64_t left = c1 - c;
  if (c < j->n_packed) {
    const int64_t packed_left = (c1 < j->n_packed ? c1 : j->n_packed) - c;
    const int64_t most =
        n_x == 1 ? BRISK_PACK_ROWS * BRISK_MM_R8_GEMV_GROUPS : (int64_t)j->packed_gemm_w;
    return (int)(clamp64(packed_left, BRISK_PACK_ROWS, most) / BRISK_PACK_ROWS * BRISK_PACK_ROWS);
  }
  if (j->wide) return (int)(left < BRISK_MM_WIDE_W ? left : BRISK_MM_WIDE_W);
  return n_x == 1 && left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

/* Outputs [r0, r1) x [c0, c1) in tile-kernel calls. Column groups run outer
 * so a group's weight rows stay in L1 while the activation rows pass. */
static void run_block(const mm_job *j, int64_t c0, int64_t c1, int64_t r0, int64_t r1,
                      bool prefetch) {
  brisk_mm_tile t = {.k = j->k,
                     .w_stride = j->w_stride,
                     .x_stride = j->xa_stride,
                     .y_stride = (size_t)j->n,
                     .prefetch = prefetch};
  for (int64_t c = c0; c < c1;) {
    const bool packed = c < j->n_packed;
    const int nw = tile_rows(j, c, c1, r1 - r0);
    const brisk_mm_tile_fn fn = packed ? j->packed : j->tile;
    t.w = j->w + (size_t)c * j->w_stride;
    for (int64_t r = r0; r < r1; r += BRISK_MM_MAX_X) {
      const int nx = (int)(r1 - r < BRISK_MM_MAX_X ? r1 - r : BRISK_MM_MAX_X);
      t.x = j->xa + (size_t)r * j->xa_stride;
      t.y = j->y + (size_t)r * (size_t)j->n + (size_t)c;
      fn(&t, nw, nx);
    }
    c += nw;
  }
}

static void act_task(void *ctx, size_t i) {
  const mm_job *j = ctx;
  int64_t r0 = (int64_t)i * j->act_rows, r1 = r0 + j->act_rows;
  if (r1 > j->m) r1 = j->m;
  for (int64_t r = r0; r < r1; r++)
    j->act(j->x + (size_t)r * (size_t)j->k, j->xq + (size_t)r * j->xa_stride, j->k);
}

static void gemv_task(void *ctx, size_t i) {
  const mm_job *j = ctx;
  int64_t c0 = (int64_t)i * j->w_rows, c1 = c0 + j->w_rows;
  if (c1 > j->n) c1 = j->n;
  run_block(j, c0, c1, 0, j->m, true);
}

static void gemm_task(void *ctx, size_t i) {
  const mm_job *j = ctx;
  const int64_t wt = (int64_t)i % j->n_wtiles, xt = (int64_t)i / j->n_wtiles;
  int64_t c0 = wt * j->w_rows, c1 = c0 + j->w_rows, r0 = xt * j->x_rows, r1 = r0 + j->x_rows;
  if (c1 > j->n) c1 = j->n;
  if (r1 > j->m) r1 = j->m;
  run_block(j, c0, c1, r0, r1, false);
}

/* Float-weight GEMM tile: per group of 4 activation rows, the accumulators
 * of the tile's outputs live in `acc` while k advances chunk by chunk. */
static void gemm_float_task(void *ctx, size_t i) {
  const mm_job *j = ctx;
  const int64_t wt = (int64_t)i % j->n_wtiles, xt = (int64_t)i / j->n_wtiles;
  int64_t c0 = wt * j->w_rows, c1 = c0 + j->w_rows, r0 = xt * j->x_rows, r1 = r0 + j->x_rows;
  if (c1 > j->n) c1 = j->n;
  if (r1 > j->m) r1 = j->m;
  float acc[BRISK_MM_MAX_X * FTILE_W * 16]; /* [4][FTILE_W][chunk_lanes] lane sums */
  const int64_t L = j->chunk_lanes, CW = j->chunk_w;
  brisk_mm_tile t = {
      .k = j->k, .w_stride = j->w_stride, .x_stride = j->xa_stride, .y_stride = (size_t)j->n};
  const int64_t k8 = j->k / 8 * 8;
  for (int64_t r = r0; r < r1; r += BRISK_MM_MAX_X) {
    const int nx = (int)(r1 - r < BRISK_MM_MAX_X ? r1 - r : BRISK_MM_MAX_X);
    memset(acc, 0, (size_t)(BRISK_MM_MAX_X * FTILE_W * L) * sizeof(float));
    t.x = j->xa + (size_t)r * j->xa_stride;
    for (int64_t k0 = 0; k0 < k8; k0 += FCHUNK_K) {
      const int64_t k1 = k0 + FCHUNK_K < k8 ? k0 + FCHUNK_K : k8;
      for (int64_t c = c0; c < c1; c += CW) {
        t.w = j->w + (size_t)c * j->w_stride;
        j->chunk(&t, (int)(c1 - c >= CW ? CW : c1 - c), nx, k0, k1, acc + (c - c0) * L, FTILE_W);
      }
    }
    for (int64_t c = c0; c < c1; c += CW) {
      t.w = j->w + (size_t)c * j->w_stride;
      t.y = j->y + (size_t)r * (size_t)j->n + (size_t)c;
      j->chunk(&t, (int)(c1 - c >= CW ? CW : c1 - c), nx, 0, -1, acc + (c - c0) * L, FTILE_W);
    }
  }
}

/* Checks type and k; fills the activation row size. */
static brisk_status check_shape(const char *fn, uint32_t w_type, int64_t k, int64_t m,
                                size_t *xa_stride, uint64_t *w_row_bytes) {
  if (!brisk_mm_scalar_tile(w_type)) {
    if (w_type == BRISK_DTYPE_Q2_K || w_type == BRISK_DTYPE_Q3_K)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "%s: weight type %s has no CPU kernel (only q4_k, q5_k and q6_k of the "
                         "K-types do); requantize the model",
                         fn, brisk_dtype_name(w_type));
    return brisk_error(BRISK_E_UNSUPPORTED, "%s: weight type %s (%u) has no CPU matmul kernel", fn,
                       brisk_dtype_name(w_type), w_type);
  }
  if (k < 0 || m < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: negative size (k = %lld, m = %lld)", fn,
                       (long long)k, (long long)m);
  if (!brisk_dtype_row_bytes(w_type, (uint64_t)k, w_row_bytes) || *w_row_bytes > SIZE_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: k = %lld is not a multiple of %s's block size %u (or overflows)", fn,
                       (long long)k, brisk_dtype_name(w_type),
                       brisk_dtype_get(brisk_dtype_base(w_type))->block_size);
  size_t xk;
  if (brisk_mul_overflow_size((size_t)k, sizeof(float), &xk))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: k = %lld overflows", fn, (long long)k);
  *xa_stride = brisk_mm_act_row_bytes(brisk_mm_act_format(w_type), k);
  return BRISK_OK;
}

/* Quantized-activation bytes for m rows (0 for float weights); false on
 * overflow. */
static bool act_bytes(uint32_t w_type, size_t xa_stride, int64_t m, size_t *bytes) {
  if (brisk_mm_act_format(w_type) == BRISK_MM_ACT_F32 || m == 0) {
    *bytes = 0;
    return true;
  }
  return !brisk_mul_overflow_size(xa_stride, (size_t)m, bytes) &&
         !brisk_add_overflow_size(*bytes, WS_ALIGN, bytes);
}

size_t brisk_cpu_matmul_workspace_size(uint32_t w_type, int64_t k, int64_t m, int n_tasks) {
  size_t xa_stride, bytes;
  uint64_t row_bytes;
  if (n_tasks < 1 || !brisk_mm_scalar_tile(w_type) || k < 0 || m < 0) return SIZE_MAX;
  if (!brisk_dtype_row_bytes(w_type, (uint64_t)k, &row_bytes) || row_bytes > SIZE_MAX)
    return SIZE_MAX;
  xa_stride = brisk_mm_act_row_bytes(brisk_mm_act_format(w_type), k);
  return act_bytes(w_type, xa_stride, m, &bytes) ? bytes : SIZE_MAX;
}

static bool is_packed_type(uint32_t w_type) { return brisk_dtype_base(w_type) != w_type; }

static bool misaligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

brisk_status brisk_cpu_matmul(brisk_threadpool *pool, uint32_t w_type, const void *w, int64_t n,
                              int64_t k, const float *x, int64_t m, float *y, void *workspace,
                              size_t workspace_size) {
  return brisk_cpu_matmul_at(pool, BRISK_ISA_BEST, w_type, w, n, k, x, m, y, workspace,
                             workspace_size);
}

brisk_status brisk_cpu_matmul_ex(brisk_threadpool *pool, bool allow_avx2, uint32_t w_type,
                                 const void *w, int64_t n, int64_t k, const float *x, int64_t m,
                                 float *y, void *workspace, size_t workspace_size) {
  return brisk_cpu_matmul_at(pool, allow_avx2 ? BRISK_ISA_BEST : BRISK_ISA_SCALAR, w_type, w, n, k,
                             x, m, y, workspace, workspace_size);
}

brisk_status brisk_cpu_matmul_at(brisk_threadpool *pool, brisk_isa_level max, uint32_t w_type,
                                 const void *w, int64_t n, int64_t k, const float *x, int64_t m,
                                 float *y, void *workspace, size_t workspace_size) {
  static const char fn[] = "brisk_cpu_matmul";
  size_t xa_stride = 0;
  uint64_t row_bytes = 0;
  brisk_status st = check_shape(fn, w_type, k, m, &xa_stride, &row_bytes);
  if (st != BRISK_OK) return st;
  if (n < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: negative n = %lld", fn, (long long)n);
  if (m == 0 || n == 0) return BRISK_OK;
  size_t span, xs, ys;
  if (brisk_mul_overflow_size((size_t)row_bytes, (size_t)n, &span) ||
      brisk_mul_overflow_size((size_t)k * sizeof(float), (size_t)m, &xs) ||
      brisk_mul_overflow_size((size_t)n * sizeof(float), (size_t)m, &ys) ||
      (uint64_t)n > SIZE_MAX / sizeof(float))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: sizes overflow (n = %lld, k = %lld, m = %lld, type %s)", fn,
                       (long long)n, (long long)k, (long long)m, brisk_dtype_name(w_type));
  if (!y || (k > 0 && (!w || !x)))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: NULL %s", fn, !y ? "y" : !w ? "w" : "x");
  const uint32_t base = brisk_dtype_base(w_type); /* packed ids: the type they regroup */
  const brisk_dtype_info *info = brisk_dtype_get(base);
  if (misaligned(y, 4) || (k > 0 && misaligned(x, 4)) ||
      (k > 0 && !info->quantized && misaligned(w, info->type_size)))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: misaligned pointer (x and y need 4 bytes, %s weights %u)", fn,
                       info->name, info->quantized ? 1 : info->type_size);
  if (k == 0) {
    memset(y, 0, ys);
    return BRISK_OK;
  }

  size_t need;
  if (!act_bytes(w_type, xa_stride, m, &need))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: workspace size overflows (k = %lld, m = %lld)", fn, (long long)k,
                       (long long)m);
  void *owned = NULL;
  if (need > 0 && !workspace) {
    owned = brisk_aligned_alloc(WS_ALIGN, need);
    if (!owned) return brisk_error_oom();
    workspace = owned;
    workspace_size = need;
  }
  if (workspace_size < need)
    return brisk_error(
        BRISK_E_BUFFER_TOO_SMALL,
        "%s: workspace of %zu bytes is below the %zu needed (%s, k = %lld, m = %lld)", fn,
        workspace_size, need, brisk_dtype_name(w_type), (long long)k, (long long)m);

  brisk_isa_level level = brisk_cpu_matmul_isa();
  if (max < level) level = max;
  /* aarch64: NEON kernels where the type has them, the scalar ones (same
   * bits) for the rest of the call. */
  const bool neon = brisk_isa_is_neon(level);
  const brisk_mm_tile_fn neon_base = neon ? brisk_mm_neon_tile(base, level) : NULL;
  const brisk_mm_tile_fn neon_packed = neon ? brisk_mm_neon_tile(w_type, level) : NULL;
  const bool avx2 = !neon && level >= BRISK_ISA_AVX2 && brisk_mm_avx2_tile(w_type) != NULL &&
                    brisk_mm_avx2_tile(base) != NULL;
  /* AVX-512 kernels where the type has them (the packed groups); they give
   * the AVX2 kernels' bits, so the AVX2 ones serve the rest of the call. */
  const brisk_mm_tile_fn fn512 = avx2 && level >= BRISK_ISA_AVX512 && is_packed_type(w_type)
                                     ? brisk_mm_avx512_tile(w_type)
                                     : NULL;
  /* AVX-VNNI where there is no AVX-512 kernel (the same bits again). */
  const brisk_mm_tile_fn vnni =
      avx2 && !fn512 && level >= BRISK_ISA_AVXVNNI && brisk_cpu()->avxvnni && is_packed_type(w_type)
          ? brisk_mm_avxvnni_tile(w_type)
          : NULL;
  /* Float weights: AVX-512 tile and chunk kernels together, or neither, so
   * that GEMV and GEMM give the same bits. */
  const brisk_mm_tile_fn float512 =
      avx2 && level >= BRISK_ISA_AVX512 && brisk_mm_avx512_float_chunk(w_type)
          ? brisk_mm_avx512_float_tile(w_type)
          : NULL;
  const brisk_mm_act act = brisk_mm_act_format(w_type);
  const brisk_mm_tile_fn wide = avx2 ? brisk_mm_avx2_q32_wide(base) : NULL;
  const bool is_packed = base != w_type;
  mm_job j = {
      .tile = wide        ? wide
              : float512  ? float512
              : avx2      ? brisk_mm_avx2_tile(base)
              : neon_base ? neon_base
                          : brisk_mm_scalar_tile(base),
      .wide = wide != NULL,
      .packed = !is_packed    ? NULL
                : fn512       ? fn512
                : vnni        ? vnni
                : avx2        ? brisk_mm_avx2_tile(w_type)
                : neon_packed ? neon_packed
                              : brisk_mm_scalar_tile(w_type),
      .n_packed = is_packed ? n / BRISK_PACK_ROWS * BRISK_PACK_ROWS : 0,
      .packed_gemm_w = fn512 ? BRISK_PACK_ROWS * BRISK_MM_R8_GEMM_GROUPS_512 : BRISK_PACK_ROWS,
      .act = act == BRISK_MM_ACT_F32 ? NULL
             : avx2                  ? brisk_mm_avx2_act(act)
                                     : brisk_mm_scalar_act(act),
      .w = w,
      .w_stride = (size_t)row_bytes,
      .x = x,
      .xa = (const uint8_t *)x,
      .xa_stride = act == BRISK_MM_ACT_F32 ? (size_t)k * sizeof(float) : xa_stride,
      .y = y,
      .n = n,
      .k = k,
      .m = m,
  };
  /* F16 and BF16 at the AVX-512 level: their own kernels, GEMV and GEMM in
   * one order (mm_avx512_half.c). */
  if (avx2 && level >= BRISK_ISA_AVX512 && brisk_mm_avx512_half(pool, w_type, w, n, k, x, m, y))
    return BRISK_OK;
  const int64_t conc = brisk_parallel_concurrency(pool);
  if (j.act) {
    uintptr_t p = ((uintptr_t)workspace + WS_ALIGN - 1) & ~(uintptr_t)(WS_ALIGN - 1);
    j.xq = (uint8_t *)p;
    j.xa = j.xq;
    /* Small m: quantize on this thread, a task switch costs more. */
    j.act_rows = m <= GEMV_MAX_M ? m : ceil_div(m, conc);
    brisk_parallel_for(pool, (size_t)ceil_div(m, j.act_rows), act_task, &j);
  }

  if (m <= GEMV_MAX_M) {
    /* About 4 tasks per thread for balance; whole groups of 4 rows. */
    const int64_t g = j.wide || j.packed ? BRISK_MM_WIDE_W : 4;
    j.w_rows = clamp64(ceil_div(ceil_div(n, 4 * conc), g) * g, g, n);
    brisk_parallel_for(pool, (size_t)ceil_div(n, j.w_rows), gemv_task, &j);
  } else if ((j.chunk = float512 ? brisk_mm_avx512_float_chunk(w_type)
                        : avx2   ? brisk_mm_avx2_float_chunk(w_type)
                                 : NULL) != NULL) {
    j.chunk_lanes = float512 ? 16 : 8;
    j.chunk_w = float512 ? BRISK_MM_CHUNK_W_512 : 2;
    j.x_rows = FTILE_X;
    j.w_rows = FTILE_W;
    while (j.w_rows > 2 && ceil_div(n, j.w_rows) * ceil_div(m, j.x_rows) < 4 * conc) j.w_rows /= 2;
    j.n_wtiles = ceil_div(n, j.w_rows);
    brisk_parallel_for(pool, (size_t)(j.n_wtiles * ceil_div(m, j.x_rows)), gemm_float_task, &j);
  } else {
    j.x_rows = clamp64((int64_t)(TILE_X_BYTES / j.xa_stride) / 4 * 4, 4, 128);
    /* Packed weights: whole tiles of the widest packed kernel where the
     * rows allow, so that no tile ends in a narrower (slower) call. */
    const int64_t g = j.packed && n >= j.packed_gemm_w ? j.packed_gemm_w
                      : j.wide || j.packed             ? BRISK_MM_WIDE_W
                                                       : 2;
    j.w_rows = clamp64((int64_t)(TILE_W_BYTES / j.w_stride) / g * g, g, 64);
    /* Enough tiles to keep every thread busy. */
    while (j.w_rows > g && ceil_div(n, j.w_rows) * ceil_div(m, j.x_rows) < 4 * conc)
      j.w_rows = j.w_rows / (2 * g) * g > g ? j.w_rows / (2 * g) * g : g;
    j.n_wtiles = ceil_div(n, j.w_rows);
    brisk_parallel_for(pool, (size_t)(j.n_wtiles * ceil_div(m, j.x_rows)), gemm_task, &j);
  }
  brisk_aligned_free(owned);
  return BRISK_OK;
}
