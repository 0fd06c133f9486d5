/* brisk perplexity's arithmetic (tools/brisk/ppl_logits.c) against float64
 * references on fresh random logits: the negative log-likelihood, the
 * 16-bit compression of log-probabilities (each level within half a step
 * of the exact value), KL divergence and top-1 agreement from a saved row,
 * llama.cpp's percentile, and the saved-logits file written, read back and
 * refused when broken. */
#include "test_support.h"

#include "../../tools/brisk/ppl_logits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV 1000

static void random_logits(test_rng *r, float *x, int n, double spread) {
  for (int i = 0; i < n; i++) x[i] = (float)(spread * test_rng_normal(r));
}

/* log softmax in float64. */
static void ref_log_softmax(const float *x, int n, double *out) {
  double mx = -INFINITY, s = 0;
  /* not fmax: aarch64 gcc 12 crashes vectorizing that reduction (an
   * internal compiler error in vect_transform_reduction); the logits have
   * no NaN, so the plain comparison is the same maximum */
  for (int i = 0; i < n; i++) mx = (double)x[i] > mx ? (double)x[i] : mx;
  for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
  for (int i = 0; i < n; i++) out[i] = (double)x[i] - mx - log(s);
}

static void test_nll_and_compression(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("ppl_nll");
  float x[NV];
  double lp[NV];
  uint16_t row[NV + 4];
  assert_int_equal(ppl_row_u16(NV), NV + 4);
  assert_int_equal(ppl_row_u16(7), 12); /* odd vocabularies pad to even */
  for (int trial = 0; trial < 20; trial++) {
    random_logits(&r, x, NV, 1.0 + trial * 0.5);
    ref_log_softmax(x, NV, lp);
    int tok = (int)(test_rng_u64(&r) % NV);
    assert_true(fabs(ppl_nll(NV, x, tok) + lp[tok]) < 1e-5 * (1 + fabs(lp[tok])));
    double nll = ppl_compress_row(NV, x, row, tok);
    assert_true(fabs(nll + lp[tok]) < 1e-4 * (1 + fabs(lp[tok])));
    float scale, mn;
    memcpy(&scale, row, 4);
    memcpy(&mn, row + 2, 4);
    double lmax = -INFINITY, lmin = INFINITY;
    for (int i = 0; i < NV; i++) {
      lmax = fmax(lmax, lp[i]);
      lmin = fmin(lmin, lp[i]);
    }
    /* The stored range is the top 16 nats; levels are 1/65535 of it. */
    assert_true(scale > 0 && scale <= 16.f / 65535.f * 1.0001f);
    assert_true(fabs(mn - fmax(lmin, lmax - 16)) < 1e-4 * (1 + fabs(mn)));
    for (int i = 0; i < NV; i++) {
      double got = scale * row[4 + i] + mn;
      if (lp[i] > lmax - 16 + 1e-3)
        assert_true(fabs(got - lp[i]) <= scale * 0.5 + 1e-4);
      else
        assert_true(got <= lmax - 16 + 1e-3);
    }
  }
}

static void test_kld(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("ppl_kld");
  float base[NV], q[NV];
  double lb[NV], lq[NV];
  uint16_t row[NV + 4];
  ppl_kld k = {0}, same = {0};
  double sum_ref = 0;
  int agree = 0;
  const int trials = 30;
  for (int t = 0; t < trials; t++) {
    random_logits(&r, base, NV, 2.0);
    for (int i = 0; i < NV; i++) q[i] = base[i] + (float)(0.2 * test_rng_normal(&r));
    ref_log_softmax(base, NV, lb);
    ref_log_softmax(q, NV, lq);
    int tok = (int)(test_rng_u64(&r) % NV);
    ppl_compress_row(NV, base, row, tok);
    /* KL(base || q) over the tokens the row keeps (log p > -16), as
     * llama.cpp sums it. */
    double kl = 0;
    int ib = 0, iq = 0;
    for (int i = 0; i < NV; i++) {
      if (lb[i] > -16) kl += exp(lb[i]) * (lb[i] - lq[i]);
      if (base[i] > base[ib]) ib = i;
      if (q[i] > q[iq]) iq = i;
    }
    float dp;
    double got = ppl_kld_row(NV, q, row, tok, &k, &dp);
    assert_true(fabs(got - kl) < 2e-3 * kl + 2e-4);
    assert_true(fabs(dp - (exp(lq[tok]) - exp(lb[tok]))) < 1e-3);
    sum_ref += kl;
    agree += ib == iq;
    /* A model compared with its own saved row: KL ~ 0, same top token. */
    double self = ppl_kld_row(NV, base, row, tok, &same, &dp);
    assert_true(fabs(self) < 1e-3);
  }
  assert_int_equal(k.count, trials);
  assert_int_equal(k.n_same_top, agree);
  assert_int_equal(same.n_same_top, trials);
  assert_true(fabs(k.sum_kld - sum_ref) < 2e-3 * sum_ref + 1e-3);
  double mean, unc;
  ppl_mean_unc(k.sum_kld, k.sum_kld2, k.count, &mean, &unc);
  assert_true(fabs(mean - sum_ref / trials) < 1e-3 && unc > 0);
}

static void test_percentile(void **state) {
  (void)state;
  const float v[] = {1, 2, 3, 4, 5};
  assert_true(ppl_percentile(v, 5, 0.5f) == 3);
  assert_true(fabsf(ppl_percentile(v, 5, 0.99f) - 4.96f) < 1e-5f);
  assert_true(ppl_percentile(v, 5, 0) == 1 && ppl_percentile(v, 5, 1) == 5);
  const float w[] = {1, 2, 3, 4};
  assert_true(ppl_percentile(w, 4, 0.5f) == 2.5f); /* the median of an even count */
  assert_true(ppl_percentile(w, 1, 0.99f) == 1);
}

static void test_file(void **state) {
  (void)state;
  char path[] = "/tmp/brisk_ppl_logits_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "wb");
  const uint32_t n_ctx = 8;
  const int32_t n_vocab = 5, n_chunk = 2;
  int32_t tokens[16];
  for (int i = 0; i < 16; i++) tokens[i] = i % n_vocab;
  assert_int_equal(ppl_base_write_header(f, n_ctx, n_vocab, n_chunk, tokens), BRISK_OK);
  const size_t nv = ppl_row_u16(n_vocab), scored = n_ctx - 1 - n_ctx / 2;
  uint16_t row[16];
  const float logits[5] = {0.5f, -1, 2, 0, 1};
  for (int c = 0; c < n_chunk; c++)
    for (size_t j = 0; j < scored; j++) {
      ppl_compress_row(n_vocab, logits, row, 1);
      assert_int_equal(fwrite(row, 2, nv, f), nv);
    }
  fclose(f);
  ppl_base b;
  assert_int_equal(ppl_base_open(fopen(path, "rb"), path, &b), BRISK_OK);
  assert_int_equal(b.n_ctx, n_ctx);
  assert_int_equal(b.n_vocab, n_vocab);
  assert_int_equal(b.n_chunk, n_chunk);
  assert_memory_equal(b.tokens, tokens, sizeof tokens);
  assert_int_equal(ppl_base_next(&b), BRISK_OK);
  assert_memory_equal(b.rows, row, nv * 2);
  assert_int_equal(ppl_base_next(&b), BRISK_OK);
  assert_int_not_equal(ppl_base_next(&b), BRISK_OK); /* no third chunk */
  ppl_base_close(&b);

  /* Broken copies: one byte short (the size no longer matches), a bad
   * magic, a token outside the vocabulary. */
  FILE *in = fopen(path, "rb");
  unsigned char buf[512];
  size_t n = fread(buf, 1, sizeof buf, in);
  fclose(in);
  struct {
    size_t at;
    unsigned char byte;
    size_t len;
    brisk_status want;
  } cases[] = {{0, 0, n - 1, BRISK_E_FORMAT},
               {0, 'X', n, BRISK_E_FORMAT},
               {20, 9, n, BRISK_E_FORMAT},
               {8, 2, n, BRISK_E_FORMAT}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    unsigned char copy[512];
    memcpy(copy, buf, n);
    if (cases[i].byte) copy[cases[i].at] = cases[i].byte;
    f = fopen(path, "wb");
    fwrite(copy, 1, cases[i].len, f);
    fclose(f);
    assert_int_equal(ppl_base_open(fopen(path, "rb"), path, &b), cases[i].want);
    assert_true(strlen(brisk_last_error()) > 0);
  }
  remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nll_and_compression),
      cmocka_unit_test(test_kld),
      cmocka_unit_test(test_percentile),
      cmocka_unit_test(test_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
