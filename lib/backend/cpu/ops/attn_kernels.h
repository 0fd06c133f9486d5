/* The inner kernels of paged attention, one set per instruction set. The
 * driver (attention.c) walks the blocks and keeps the online softmax state;
 * these do the arithmetic on a chunk of n contiguous float32 key/value rows.
 * Every kernel fixes its own order of operations per output element, so
 * results depend only on the inputs and n, never on what else is computed. */
#ifndef BRISK_BACKEND_CPU_OPS_ATTN_KERNELS_H
#define BRISK_BACKEND_CPU_OPS_ATTN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Scores and probabilities of one chunk are held in arrays of this many
 * floats (a multiple of 8: the AVX2 kernels work on whole vectors). */
#define BRISK_ATTN_MAX_CHUNK 32

typedef struct brisk_attn_kernels {
  /* sc[c] = q . k[c] for c < n <= BRISK_ATTN_MAX_CHUNK. */
  void (*scores)(const float *q /* [hd] */, const float *k /* [n][hd] */, int32_t n, int32_t hd,
                 float *sc /* [BRISK_ATTN_MAX_CHUNK] */);
  /* sc[c] = exp(sc[c] - m) for c < n; entries from n up may be clobbered. */
  void (*exp_shift)(float *sc /* [BRISK_ATTN_MAX_CHUNK], 32-byte aligned */, int32_t n, float m);
  /* acc[i] += sum over c < n of p[c] * v[c][i], c in increasing order. */
  void (*accumulate)(float *acc /* [hd] */, const float *p /* [n] */, const float *v /* [n][hd] */,
                     int32_t n, int32_t hd);
  /* x[i] *= s */
  void (*scale)(float *x /* [n] */, float s, int32_t n);
  /* F16 cache rows to float32 (exact). */
  void (*f16_to_f32)(const uint16_t *src /* [n] */, float *dst /* [n] */, size_t n);
  /* n consecutive quantized cache rows (BRISK_KVQ_DTYPE_Q8 or _FP8, each
   * brisk_kvq_row_bytes long) to float32, exactly as
   * brisk_kvq_dequantize_row. */
  void (*dequant_rows)(uint32_t dtype, const uint8_t *rows, int32_t n, int32_t hd,
                       float *dst /* [n][hd] */);
} brisk_attn_kernels;

/* The dequant_rows of the scalar and the AVX2 tables, which the other
 * tables share (the result is exact, so one implementation serves). */
void brisk_attn_dequant_rows_scalar(uint32_t dtype, const uint8_t *rows, int32_t n, int32_t hd,
                                    float *dst);
void brisk_attn_dequant_rows_avx2(uint32_t dtype, const uint8_t *rows, int32_t n, int32_t hd,
                                  float *dst);

const brisk_attn_kernels *brisk_attn_kernels_scalar(void);
/* NULL where the AVX2 kernels are not built. */
const brisk_attn_kernels *brisk_attn_kernels_avx2(void);
/* NULL where the AVX2 kernels are not built (attn_kernels_avx512.c; run
 * only by backends at BRISK_ISA_AVX512). */
const brisk_attn_kernels *brisk_attn_kernels_avx512(void);
/* NULL where the aarch64 NEON kernels are not built (attn_kernels_neon.c). */
const brisk_attn_kernels *brisk_attn_kernels_neon(void);

#endif
