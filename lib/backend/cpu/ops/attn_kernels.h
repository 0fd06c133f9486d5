/* The inner kernels of paged attention, one set per instruction set. The
 * driver (attention.c) walks the blocks and keeps the online softmax state;
 * these do the arithmetic on a chunk of n contiguous key/value rows: float32
 * rows, or F16 / INT8 rows read in place.
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
  /* F16 cache rows read in place: the numbers of scores / accumulate on the
   * widened rows, bit for bit, without the float32 copy. NULL: the driver
   * widens each chunk with f16_to_f32. */
  void (*scores_f16)(const float *q /* [hd] */, const uint16_t *k /* [n][hd] */, int32_t n,
                     int32_t hd, float *sc /* [BRISK_ATTN_MAX_CHUNK] */);
  void (*accumulate_f16)(float *acc /* [hd] */, const float *p /* [n] */,
                         const uint16_t *v /* [n][hd] */, int32_t n, int32_t hd);
  /* INT8 cache rows (BRISK_KVQ_DTYPE_Q8) read in place (attn_kernels_q8.c):
   * sc[c] = the INT8 query (qq with block scales qd, from
   * brisk_kvq_quantize_query) . key row c by integer dot products;
   * for each of nh heads, acc[h][i] += sum over c < n of
   * p[h][c] * s_g(c) * v[c][i], c in increasing order (each value widened
   * once for all the heads; a head's result does not depend on nh).
   * NULL: the driver widens each chunk with dequant_rows. */
  void (*scores_q8)(const int8_t *qq /* [hd] */, const float *qd /* [brisk_kvq_n_qblocks] */,
                    const uint8_t *k /* [n] rows */, int32_t n, int32_t hd,
                    float *sc /* [BRISK_ATTN_MAX_CHUNK] */);
  void (*accumulate_q8)(float *acc /* [nh][hd] */, const float *p /* [nh][BRISK_ATTN_MAX_CHUNK] */,
                        int32_t nh, const uint8_t *v /* [n] rows */, int32_t n, int32_t hd);
} brisk_attn_kernels;

/* The INT8 kernels (attn_kernels_q8.c). The scores of every one are the
 * scalar ones bit for bit; the avxvnni one runs only where the CPU has
 * AVX-VNNI, the avx512vnni one only at BRISK_ISA_AVX512. The vector ones
 * exist where BRISK_HAVE_AVX2_KERNELS is defined. */
void brisk_attn_scores_q8_scalar(const int8_t *qq, const float *qd, const uint8_t *k, int32_t n,
                                 int32_t hd, float *sc);
void brisk_attn_scores_q8_avx2(const int8_t *qq, const float *qd, const uint8_t *k, int32_t n,
                               int32_t hd, float *sc);
void brisk_attn_scores_q8_avxvnni(const int8_t *qq, const float *qd, const uint8_t *k, int32_t n,
                                  int32_t hd, float *sc);
void brisk_attn_scores_q8_avx512vnni(const int8_t *qq, const float *qd, const uint8_t *k, int32_t n,
                                     int32_t hd, float *sc);
void brisk_attn_accumulate_q8_scalar(float *acc, const float *p, int32_t nh, const uint8_t *v,
                                     int32_t n, int32_t hd);
void brisk_attn_accumulate_q8_avx2(float *acc, const float *p, int32_t nh, const uint8_t *v,
                                   int32_t n, int32_t hd);
void brisk_attn_accumulate_q8_avx512(float *acc, const float *p, int32_t nh, const uint8_t *v,
                                     int32_t n, int32_t hd);

/* The dequant_rows of the scalar and the AVX2 tables, which the other
 * tables share (the result is exact, so one implementation serves). */
void brisk_attn_dequant_rows_scalar(uint32_t dtype, const uint8_t *rows, int32_t n, int32_t hd,
                                    float *dst);
void brisk_attn_dequant_rows_avx2(uint32_t dtype, const uint8_t *rows, int32_t n, int32_t hd,
                                  float *dst);

const brisk_attn_kernels *brisk_attn_kernels_scalar(void);
/* NULL where the AVX2 kernels are not built. */
const brisk_attn_kernels *brisk_attn_kernels_avx2(void);
/* The AVX2 table with the AVX-VNNI INT8 scores (for backends at
 * BRISK_ISA_AVXVNNI on a CPU with AVX-VNNI); NULL where the AVX2 kernels
 * are not built. */
const brisk_attn_kernels *brisk_attn_kernels_avxvnni(void);
/* NULL where the AVX2 kernels are not built (attn_kernels_avx512.c; run
 * only by backends at BRISK_ISA_AVX512). */
const brisk_attn_kernels *brisk_attn_kernels_avx512(void);
/* NULL where the aarch64 NEON kernels are not built (attn_kernels_neon.c). */
const brisk_attn_kernels *brisk_attn_kernels_neon(void);

#endif
