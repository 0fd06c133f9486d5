/* Row-level entry points: argument checks, then per-type dispatch. */
#include "quant/quant.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

#include <string.h>

static void quantize_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void quantize_f16(const float *x, void *y, int64_t n) {
  brisk_f32_to_f16_array(x, y, (size_t)n);
}
static void quantize_bf16(const float *x, void *y, int64_t n) {
  brisk_f32_to_bf16_array(x, y, (size_t)n);
}
static void dequantize_f32(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void dequantize_f16(const void *x, float *y, int64_t n) {
  brisk_f16_to_f32_array(x, y, (size_t)n);
}
static void dequantize_bf16(const void *x, float *y, int64_t n) {
  brisk_bf16_to_f32_array(x, y, (size_t)n);
}

typedef void (*quantize_fn)(const float *, void *, int64_t);
typedef void (*dequantize_fn)(const void *, float *, int64_t);

static const struct {
  quantize_fn quantize;
  dequantize_fn dequantize;
} table[BRISK_DTYPE_COUNT] = {
    [BRISK_DTYPE_F32] = {quantize_f32, dequantize_f32},
    [BRISK_DTYPE_F16] = {quantize_f16, dequantize_f16},
    [BRISK_DTYPE_BF16] = {quantize_bf16, dequantize_bf16},
    [BRISK_DTYPE_Q4_0] = {brisk_quantize_row_q4_0, brisk_dequantize_row_q4_0},
    [BRISK_DTYPE_Q4_1] = {brisk_quantize_row_q4_1, brisk_dequantize_row_q4_1},
    [BRISK_DTYPE_Q5_0] = {brisk_quantize_row_q5_0, brisk_dequantize_row_q5_0},
    [BRISK_DTYPE_Q5_1] = {brisk_quantize_row_q5_1, brisk_dequantize_row_q5_1},
    [BRISK_DTYPE_Q8_0] = {brisk_quantize_row_q8_0, brisk_dequantize_row_q8_0},
    [BRISK_DTYPE_Q2_K] = {NULL, brisk_dequantize_row_q2_k},
    [BRISK_DTYPE_Q3_K] = {NULL, brisk_dequantize_row_q3_k},
    [BRISK_DTYPE_Q4_K] = {brisk_quantize_row_q4_k, brisk_dequantize_row_q4_k},
    [BRISK_DTYPE_Q5_K] = {brisk_quantize_row_q5_k, brisk_dequantize_row_q5_k},
    [BRISK_DTYPE_Q6_K] = {brisk_quantize_row_q6_k, brisk_dequantize_row_q6_k},
    [BRISK_DTYPE_Q8_K] = {brisk_quantize_row_q8_k, brisk_dequantize_row_q8_k},
};

typedef void (*quantize_w_fn)(const float *, void *, int64_t, const float *);

static quantize_w_fn weighted(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_Q4_0: return brisk_quantize_row_q4_0_w;
  case BRISK_DTYPE_Q4_1: return brisk_quantize_row_q4_1_w;
  case BRISK_DTYPE_Q5_0: return brisk_quantize_row_q5_0_w;
  case BRISK_DTYPE_Q5_1: return brisk_quantize_row_q5_1_w;
  case BRISK_DTYPE_Q4_K: return brisk_quantize_row_q4_k_w;
  case BRISK_DTYPE_Q5_K: return brisk_quantize_row_q5_k_w;
  case BRISK_DTYPE_Q6_K: return brisk_quantize_row_q6_k_w;
  default: return NULL;
  }
}

bool brisk_quant_uses_importance(uint32_t type) { return weighted(type) != NULL; }

bool brisk_quant_can_quantize(uint32_t type) {
  return type < BRISK_DTYPE_COUNT && table[type].quantize;
}
bool brisk_quant_can_dequantize(uint32_t type) {
  return type < BRISK_DTYPE_COUNT && table[type].dequantize;
}

static brisk_status check_row(const char *what, uint32_t type, const void *src, const void *dst,
                              int64_t n) {
  const brisk_dtype_info *info = brisk_dtype_get(type);
  if (n < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: n = %lld is negative", what, (long long)n);
  if (n % info->block_size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: n = %lld is not a multiple of %s's block size %u", what, (long long)n,
                       info->name, info->block_size);
  if (n > 0 && (!src || !dst))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: NULL %s with n = %lld", what,
                       src ? "dst" : "src", (long long)n);
  /* Row bytes must fit size_t for the memcpy-based types. */
  uint64_t bytes;
  if (!brisk_dtype_row_bytes(type, (uint64_t)n, &bytes) || bytes > SIZE_MAX ||
      (uint64_t)n > SIZE_MAX / sizeof(float))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: a row of %lld %s elements is too large", what,
                       (long long)n, info->name);
  return BRISK_OK;
}

brisk_status brisk_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
  if (!brisk_quant_can_quantize(type))
    return brisk_error(BRISK_E_UNSUPPORTED, "brisk_quantize_row: no quantizer for type %s (%u)",
                       brisk_dtype_name(type), type);
  brisk_status st = check_row("brisk_quantize_row", type, src, dst, n);
  if (st != BRISK_OK) return st;
  if (n > 0) table[type].quantize(src, dst, n);
  return BRISK_OK;
}

brisk_status brisk_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
  if (!brisk_quant_can_dequantize(type))
    return brisk_error(BRISK_E_UNSUPPORTED, "brisk_dequantize_row: no dequantizer for type %s (%u)",
                       brisk_dtype_name(type), type);
  brisk_status st = check_row("brisk_dequantize_row", type, src, dst, n);
  if (st != BRISK_OK) return st;
  if (n > 0) table[type].dequantize(src, dst, n);
  return BRISK_OK;
}

/* Sum over a block of imp * (x - y)^2, in double. */
static double block_werr(const float *x, const float *y, const float *imp, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; i++) {
    const double r = (double)x[i] - y[i];
    e += (double)imp[i] * r * r;
  }
  return e;
}

brisk_status brisk_quantize_row_weighted(uint32_t type, const float *src, void *dst, int64_t n,
                                         const float *imp) {
  quantize_w_fn fn = weighted(type);
  if (!imp || !fn) return brisk_quantize_row(type, src, dst, n);
  brisk_status st = check_row("brisk_quantize_row_weighted", type, src, dst, n);
  if (st != BRISK_OK || n == 0) return st;
  fn(src, dst, n, imp);
  /* The weighted searches are heuristics (a few candidate scales, then the
   * super-block scales rounded to 6 or 8 bits): on a block whose importance
   * one column dominates they can lose to the plain quantizer on their own
   * objective. Each block keeps whichever of the two has the lower weighted
   * error, so weighting never makes a block worse than not weighting. */
  const brisk_dtype_info *info = brisk_dtype_get(type);
  const int64_t be = info->block_size;
  const size_t bs = info->type_size;
  uint8_t plain[256];                                 /* one block (at most q6_k's 210 bytes) */
  float yw[256], yp[256];                             /* dequantized, at most 256 elements */
  if (be > 256 || bs > sizeof plain) return BRISK_OK; /* no such type: the weighted result stands */
  const quantize_fn plain_fn = table[type].quantize;  /* type < BRISK_DTYPE_COUNT: checked */
  const dequantize_fn deq = table[type].dequantize;
  if (!plain_fn || !deq) return BRISK_OK;
  for (int64_t b = 0; b < n / be; b++) {
    const float *x = src + b * be, *w = imp + b * be;
    uint8_t *q = (uint8_t *)dst + (size_t)b * bs;
    plain_fn(x, plain, be);
    deq(q, yw, be);
    deq(plain, yp, be);
    if (block_werr(x, yp, w, be) < block_werr(x, yw, w, be)) memcpy(q, plain, bs);
  }
  return BRISK_OK;
}
