/* Writes into the paged KV caches: each token's k and v heads into their
 * slots (quantized caches through the reference row quantizer: a row is a
 * few dozen operations, dwarfed by the matmuls that made it), and
 * whole-block copies for copy-on-write. */
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

#include <string.h>

typedef struct kv_write_job {
  const brisk_kv_layout *kv;
  void *caches[2];      // each [n_blocks][n_kv_heads][block_size][head_dim]
  const float *src[2];  // k, v: each [n_tokens][n_kv_heads][head_dim]
  const int64_t *slots; // [n_tokens]
  size_t row_bytes;     // of one cache row
  bool avx2;
} kv_write_job;

static void to_f16_scalar(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = brisk_f32_to_f16(src[i]);
}

#ifdef BRISK_HAVE_AVX2_KERNELS
/* F16C rounds to nearest even like brisk_f32_to_f16, so both paths store the
 * same bits. */
BRISK_AVX2 static void to_f16_avx2(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = brisk_f32_to_f16(src[i]);
}
#endif

static void kv_write_range(void *p, int64_t t0, int64_t t1) {
  const kv_write_job *j = p;
  const brisk_kv_layout *kv = j->kv;
  const int64_t hd = kv->head_dim;
  for (int64_t t = t0; t < t1; t++) {
    int64_t slot = j->slots[t];
    if (slot < 0) continue;
    int64_t block = slot / kv->block_size, in_block = slot % kv->block_size;
    for (int c = 0; c < 2; c++) {
      for (int32_t h = 0; h < kv->n_kv_heads; h++) {
        const float *src = j->src[c] + (t * kv->n_kv_heads + h) * hd;
        int64_t row = (block * kv->n_kv_heads + h) * kv->block_size + in_block, at = row * hd;
        if (brisk_kvq_is_quantized(kv->dtype)) {
          uint8_t *dst = (uint8_t *)j->caches[c] + row * (int64_t)j->row_bytes;
          brisk_kvq_quantize_row(kv->dtype, src, dst, kv->head_dim);
          continue;
        }
        if (kv->dtype == BRISK_DTYPE_F32) {
          memcpy((float *)j->caches[c] + at, src, (size_t)hd * sizeof(float));
          continue;
        }
        uint16_t *dst = (uint16_t *)j->caches[c] + at;
#ifdef BRISK_HAVE_AVX2_KERNELS
        if (j->avx2) {
          to_f16_avx2(src, dst, hd);
          continue;
        }
#endif
        to_f16_scalar(src, dst, hd);
      }
    }
  }
}

brisk_status brisk_cpu_ops_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                    void *v_cache, const float *k, const float *v,
                                    const int64_t *slots, int32_t n_tokens) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_kv_write(kv, k_cache, v_cache, k, v, slots, n_tokens);
  if (st != BRISK_OK || n_tokens == 0) return st;
  kv_write_job job = {
      kv, {k_cache, v_cache}, {k, v}, slots, brisk_kvq_row_bytes(kv->dtype, kv->head_dim), c->avx2};
  double work = 2.0 * n_tokens * (double)kv->n_kv_heads * kv->head_dim;
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, work, kv_write_range, &job);
  return BRISK_OK;
}

brisk_status brisk_cpu_ops_kv_copy_blocks(brisk_backend *be, const brisk_kv_layout *kv, void *cache,
                                          const int32_t *pairs, int32_t n_pairs) {
  (void)be;
  size_t block_bytes = 0;
  brisk_status st = brisk_check_kv_copy_blocks(kv, cache, pairs, n_pairs, &block_bytes);
  if (st != BRISK_OK) return st;
  for (int32_t i = 0; i < n_pairs; i++)
    memcpy((char *)cache + (size_t)pairs[2 * i + 1] * block_bytes,
           (const char *)cache + (size_t)pairs[2 * i] * block_bytes, block_bytes);
  return BRISK_OK;
}
