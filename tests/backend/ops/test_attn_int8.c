/* The attention kernels that read INT8 and F16 cache rows in place
 * (attn_kernels_q8.c, attn_kernels.c, attn_kernels_avx512.c), each path
 * against float64 on fresh random inputs:
 * - the query quantizer: every value within half a step of the input;
 * - INT8 scores of every path bitwise equal to the scalar integer path, the
 *   scalar path within float32 rounding of the float64 dot product of the
 *   quantized query and keys, and within the quantizer's half step of the
 *   float64 dot product with the unquantized query;
 * - INT8 value accumulation against float64;
 * - F16 scores and accumulation read in place bitwise equal to the same
 *   kernels on the widened rows.
 * The whole attention on an INT8 cache is in test_attention.c. */
#include "ops_test.h"

#include "backend/cpu/ops/attn_kernels.h"
#include "backend/cpu/ops/vec.h"
#include "core/cpu.h"
#include "core/half.h"
#include "quant/kv_quant.h"

#include <stdint.h>

#define U 0x1p-24 /* float32 unit roundoff */

typedef void (*scores_q8_fn)(const int8_t *, const float *, const uint8_t *, int32_t, int32_t,
                             float *);
typedef void (*acc_q8_fn)(float *, const float *, int32_t, const uint8_t *, int32_t, int32_t);

typedef struct q8_path {
  const char *name;
  scores_q8_fn scores;
  acc_q8_fn accumulate;
} q8_path;

/* The kernels this processor runs, scalar first. */
static int q8_paths(q8_path *p) {
  int n = 0;
  p[n++] = (q8_path){"scalar", brisk_attn_scores_q8_scalar, brisk_attn_accumulate_q8_scalar};
#ifdef BRISK_HAVE_AVX2_KERNELS
  const brisk_cpu_features *f = brisk_cpu();
  const brisk_isa_level lv = brisk_cpu_isa_detected();
  if (lv >= BRISK_ISA_AVX2 && !brisk_isa_is_neon(lv))
    p[n++] = (q8_path){"avx2", brisk_attn_scores_q8_avx2, brisk_attn_accumulate_q8_avx2};
  else
    fprintf(stderr, "note: no AVX2 here: the AVX2 INT8 kernels are not run\n");
  if (f->avxvnni && lv >= BRISK_ISA_AVX2 && !brisk_isa_is_neon(lv))
    p[n++] = (q8_path){"avxvnni", brisk_attn_scores_q8_avxvnni, brisk_attn_accumulate_q8_avx2};
  else
    fprintf(stderr, "note: no AVX-VNNI here: the AVX-VNNI INT8 scores are not run\n");
  if (lv == BRISK_ISA_AVX512)
    p[n++] =
        (q8_path){"avx512vnni", brisk_attn_scores_q8_avx512vnni, brisk_attn_accumulate_q8_avx512};
  else
    fprintf(stderr, "note: no AVX-512 F/BW/VL/VNNI here: those INT8 kernels are not run\n");
#endif
  return n;
}

/* Row r of x[hd] scaled by a random magnitude (rows and groups of very
 * different sizes, as real keys have) with a few outliers. */
static void rand_row(test_rng *r, float *x, int32_t hd) {
  const double mag = exp(test_rng_uniform(r, -4, 3));
  for (int32_t i = 0; i < hd; i++) {
    double v = test_rng_normal(r) * mag * (i % 64 < 32 ? 1 : 0.3);
    if (rand_int(r, 0, 40) == 0) v *= 12;
    x[i] = (float)v;
  }
}

static void test_quantize_query(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("quantize_query");
  float x[1024], d[1024 / BRISK_KVQ_QBLOCK];
  int8_t q[1024];
  for (int it = 0; it < 300; it++) {
    const int32_t hd = rand_int(&r, 1, 1024);
    rand_row(&r, x, hd);
    if (it % 7 == 0) /* an all-zero block */
      for (int32_t i = 0; i < hd && i < BRISK_KVQ_QBLOCK; i++) x[i] = 0;
    brisk_kvq_quantize_query(x, q, d, hd);
    for (int32_t b = 0; b < brisk_kvq_n_qblocks(hd); b++) {
      double amax = 0;
      for (int32_t i = b * BRISK_KVQ_QBLOCK; i < hd && i < (b + 1) * BRISK_KVQ_QBLOCK; i++)
        amax = fmax(amax, fabs(x[i]));
      assert_true(fabs(d[b] - amax / 127) <= U * amax / 127);
      for (int32_t i = b * BRISK_KVQ_QBLOCK; i < hd && i < (b + 1) * BRISK_KVQ_QBLOCK; i++) {
        assert_true(q[i] >= -127 && q[i] <= 127);
        /* Half a step, plus the rounding of x / d. */
        if (!(fabs((double)d[b] * q[i] - x[i]) <= d[b] * (0.5 + 1e-5))) {
          fprintf(stderr, "hd %d i %d x %.9g d %.9g q %d\n", hd, i, x[i], d[b], q[i]);
          fail();
        }
      }
    }
  }
  /* Non-finite queries give non-finite scales, never undefined conversions. */
  for (int32_t i = 0; i < 64; i++) x[i] = 1;
  x[3] = NAN, x[40] = INFINITY;
  brisk_kvq_quantize_query(x, q, d, 64);
  assert_true(isnan(d[0]) && isinf(d[1]));
  for (int32_t i = 0; i < 64; i++) assert_int_equal(q[i], 0);
}

static void test_scores_q8(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("scores_q8");
  q8_path P[4];
  const int np = q8_paths(P);
  const int32_t head_dims[] = {64, 128, 96, 32, 256, 48, 20, 8, 1024, 160};
  const size_t max_rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, 1024);
  uint8_t *rows = malloc(BRISK_ATTN_MAX_CHUNK * max_rb);
  float *x = malloc(1024 * sizeof *x), *kf = malloc(BRISK_ATTN_MAX_CHUNK * 1024 * sizeof *kf);
  float qd[1024 / BRISK_KVQ_QBLOCK];
  int8_t qq[1024];
  double worst_rel = 0, worst_q = 0;
  int cases = 0;
  for (size_t hi = 0; hi < sizeof head_dims / sizeof *head_dims; hi++) {
    const int32_t hd = head_dims[hi], ng = brisk_kvq_n_groups(hd);
    const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
    for (int it = 0; it < 40; it++, cases++) {
      const int32_t n = it % 4 == 0 ? BRISK_ATTN_MAX_CHUNK : rand_int(&r, 1, BRISK_ATTN_MAX_CHUNK);
      for (int32_t c = 0; c < n; c++) {
        rand_row(&r, x, hd);
        brisk_kvq_quantize_row(BRISK_KVQ_DTYPE_Q8, x, rows + c * rb, hd);
        brisk_kvq_dequantize_row_rotated(BRISK_KVQ_DTYPE_Q8, rows + c * rb, kf + (size_t)c * hd,
                                         hd);
      }
      float q[1024];
      rand_row(&r, q, hd);
      brisk_kvq_quantize_query(q, qq, qd, hd);
      float want_bits[BRISK_ATTN_MAX_CHUNK], sc[BRISK_ATTN_MAX_CHUNK];
      for (int k = 0; k < np; k++) {
        memset(sc, 0x7f, sizeof sc);
        P[k].scores(qq, qd, rows, n, hd, sc);
        if (k == 0) {
          memcpy(want_bits, sc, sizeof sc);
          continue;
        }
        /* The integers are exact and the float steps the same: equal bits. */
        if (memcmp(sc, want_bits, (size_t)n * sizeof *sc) != 0) {
          fprintf(stderr, "%s INT8 scores differ from scalar: hd %d n %d\n", P[k].name, hd, n);
          fail();
        }
      }
      for (int32_t c = 0; c < n; c++) {
        const float *k = kf + (size_t)c * hd;
        /* Against the quantized query and keys in float64: the int32 dots
         * are exact, then per block a multiply, an add into its group, a
         * multiply by the key scale and an add into the score, each one
         * rounding: (ng + 3) u of the sum of |terms| bounds it. */
        double want = 0, absum = 0, full = 0, half_step = 0;
        for (int32_t i = 0; i < hd; i++) {
          const double t = (double)qd[i / BRISK_KVQ_QBLOCK] * qq[i] * k[i];
          want += t, absum += fabs(t);
          full += (double)q[i] * k[i];
          half_step += 0.5 * qd[i / BRISK_KVQ_QBLOCK] * fabs(k[i]);
        }
        const double err = fabs(want_bits[c] - want);
        worst_rel = fmax(worst_rel, absum > 0 ? err / absum : 0);
        if (!(err <= (ng + 3) * U * absum + 1e-37)) {
          fprintf(stderr, "scalar INT8 score hd %d key %d: got %.9g want %.9g (sum|t| %.3g)\n", hd,
                  c, want_bits[c], want, absum);
          fail();
        }
        /* Against the unquantized query: each query value moved by at most
         * half its block's step (plus the x / d rounding). */
        const double qerr = fabs(want_bits[c] - full);
        worst_q = fmax(worst_q, half_step > 0 ? qerr / half_step : 0);
        if (!(qerr <= half_step * (1 + 1e-4) + (ng + 3) * U * absum + 1e-37)) {
          fprintf(stderr, "INT8 score hd %d key %d: got %.9g, float64 %.9g, bound %.3g\n", hd, c,
                  want_bits[c], full, half_step);
          fail();
        }
      }
    }
  }
  fprintf(stderr,
          "%d INT8 score cases on %d paths: worst error %.3g of sum|terms| (quantized query), "
          "%.3g of the half-step bound (float query)\n",
          cases, np, worst_rel, worst_q);
  free(rows), free(x), free(kf);
}

#define MAX_NH 7

/* Several heads at once (the values widened once for all): each head
 * against float64, and bitwise what the same kernel gives that head alone. */
static void test_accumulate_q8(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("accumulate_q8");
  q8_path P[4];
  const int np = q8_paths(P);
  const int32_t head_dims[] = {64, 128, 96, 32, 256, 48, 20, 8, 1024, 136, 72, 40};
  const size_t max_rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, 1024);
  uint8_t *rows = malloc(BRISK_ATTN_MAX_CHUNK * max_rb);
  float *x = malloc(1024 * sizeof *x), *vf = malloc(BRISK_ATTN_MAX_CHUNK * 1024 * sizeof *vf);
  float *acc0 = malloc(MAX_NH * 1024 * sizeof *acc0), *acc = malloc(MAX_NH * 1024 * sizeof *acc);
  float *one = malloc(1024 * sizeof *one);
  float p[MAX_NH][BRISK_ATTN_MAX_CHUNK];
  double worst = 0;
  for (size_t hi = 0; hi < sizeof head_dims / sizeof *head_dims; hi++) {
    const int32_t hd = head_dims[hi];
    const size_t rb = brisk_kvq_row_bytes(BRISK_KVQ_DTYPE_Q8, hd);
    for (int it = 0; it < 24; it++) {
      const int32_t n = it % 3 == 0 ? BRISK_ATTN_MAX_CHUNK : rand_int(&r, 1, BRISK_ATTN_MAX_CHUNK);
      const int32_t nh = it < MAX_NH ? it + 1 : rand_int(&r, 1, MAX_NH);
      for (int32_t c = 0; c < n; c++) {
        rand_row(&r, x, hd);
        brisk_kvq_quantize_row(BRISK_KVQ_DTYPE_Q8, x, rows + c * rb, hd);
        brisk_kvq_dequantize_row_rotated(BRISK_KVQ_DTYPE_Q8, rows + c * rb, vf + (size_t)c * hd,
                                         hd);
      }
      for (int32_t h = 0; h < nh; h++)
        for (int32_t c = 0; c < n; c++) p[h][c] = (float)test_rng_uniform(&r, 0, 1);
      for (int32_t i = 0; i < nh * hd; i++) acc0[i] = (float)test_rng_normal(&r);
      for (int k = 0; k < np; k++) {
        memcpy(acc, acc0, (size_t)nh * hd * sizeof *acc);
        P[k].accumulate(acc, &p[0][0], nh, rows, n, hd);
        for (int32_t h = 0; h < nh; h++) {
          memcpy(one, acc0 + (size_t)h * hd, (size_t)hd * sizeof *one);
          P[k].accumulate(one, p[h], 1, rows, n, hd);
          if (memcmp(one, acc + (size_t)h * hd, (size_t)hd * sizeof *one) != 0) {
            fprintf(stderr, "%s INT8 accumulate: head %d of %d differs from it alone (hd %d)\n",
                    P[k].name, h, nh, hd);
            fail();
          }
          for (int32_t i = 0; i < hd; i++) {
            /* p * s rounds, times v rounds, and n adds: (n + 2) u of the
             * sum of |terms| (the rounding of s * v inside vf adds one). */
            const float a0 = acc0[(size_t)h * hd + i], got = acc[(size_t)h * hd + i];
            double want = a0, absum = fabs(a0);
            for (int32_t c = 0; c < n; c++) {
              const double t = (double)p[h][c] * vf[(size_t)c * hd + i];
              want += t, absum += fabs(t);
            }
            const double err = fabs(got - want);
            worst = fmax(worst, err / absum);
            if (!(err <= (n + 3) * U * absum)) {
              fprintf(stderr, "%s INT8 accumulate hd %d n %d head %d i %d: got %.9g want %.9g\n",
                      P[k].name, hd, n, h, i, got, want);
              fail();
            }
          }
        }
      }
    }
  }
  fprintf(stderr, "INT8 accumulate on %d paths: worst error %.3g of sum|terms|\n", np, worst);
  free(rows), free(x), free(vf), free(acc0), free(acc), free(one);
}

/* The F16 kernels of a table (where it has them) against its own float32
 * kernels on the widened rows: equal bits. */
static void check_f16_direct(const char *name, const brisk_attn_kernels *kt, test_rng *r) {
  if (!kt || !kt->scores_f16) return;
  const int32_t head_dims[] = {64, 128, 48, 20, 8, 1024, 136};
  uint16_t *h = malloc(BRISK_ATTN_MAX_CHUNK * 1024 * sizeof *h);
  float *f = malloc(BRISK_ATTN_MAX_CHUNK * 1024 * sizeof *f);
  float q[1024], a1[1024], a2[1024], p[BRISK_ATTN_MAX_CHUNK];
  for (size_t hi = 0; hi < sizeof head_dims / sizeof *head_dims; hi++) {
    const int32_t hd = head_dims[hi];
    for (int it = 0; it < 20; it++) {
      const int32_t n = it % 2 ? BRISK_ATTN_MAX_CHUNK : rand_int(r, 1, BRISK_ATTN_MAX_CHUNK);
      for (int32_t i = 0; i < n * hd; i++) {
        h[i] = brisk_f32_to_f16((float)test_rng_normal(r));
        f[i] = brisk_f16_to_f32(h[i]);
      }
      for (int32_t i = 0; i < hd; i++) q[i] = (float)test_rng_normal(r), a1[i] = a2[i] = q[i];
      for (int32_t c = 0; c < n; c++) p[c] = (float)test_rng_uniform(r, 0, 1);
      float s1[BRISK_ATTN_MAX_CHUNK] = {0}, s2[BRISK_ATTN_MAX_CHUNK] = {0};
      kt->scores(q, f, n, hd, s1);
      kt->scores_f16(q, h, n, hd, s2);
      kt->accumulate(a1, p, f, n, hd);
      kt->accumulate_f16(a2, p, h, n, hd);
      if (memcmp(s1, s2, (size_t)n * sizeof *s1) || memcmp(a1, a2, (size_t)hd * sizeof *a1)) {
        fprintf(stderr, "%s: F16 in place differs from widened rows, hd %d n %d\n", name, hd, n);
        fail();
      }
    }
  }
  fprintf(stderr, "%s: F16 rows read in place equal the widened ones\n", name);
  free(h), free(f);
}

static void test_f16_direct(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("f16_direct");
  const brisk_isa_level lv = brisk_cpu_isa_detected();
  check_f16_direct("scalar", brisk_attn_kernels_scalar(), &r);
  if (lv >= BRISK_ISA_AVX2 && !brisk_isa_is_neon(lv)) {
    check_f16_direct("avx2", brisk_attn_kernels_avx2(), &r);
    check_f16_direct("avxvnni", brisk_attn_kernels_avxvnni(), &r);
  }
  if (lv == BRISK_ISA_AVX512) check_f16_direct("avx512", brisk_attn_kernels_avx512(), &r);
}

/* The tables point at the kernels tested above. */
static void test_tables(void **state) {
  (void)state;
  assert_ptr_equal(brisk_attn_kernels_scalar()->scores_q8, brisk_attn_scores_q8_scalar);
#ifdef BRISK_HAVE_AVX2_KERNELS
  assert_ptr_equal(brisk_attn_kernels_avx2()->scores_q8, brisk_attn_scores_q8_avx2);
  assert_ptr_equal(brisk_attn_kernels_avxvnni()->scores_q8, brisk_attn_scores_q8_avxvnni);
  assert_ptr_equal(brisk_attn_kernels_avx512()->scores_q8, brisk_attn_scores_q8_avx512vnni);
  assert_ptr_equal(brisk_attn_kernels_avx512()->accumulate_q8, brisk_attn_accumulate_q8_avx512);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_query), cmocka_unit_test(test_scores_q8),
      cmocka_unit_test(test_accumulate_q8),  cmocka_unit_test(test_f16_direct),
      cmocka_unit_test(test_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
