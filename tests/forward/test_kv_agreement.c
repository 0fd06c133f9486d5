/* Top-1 agreement of the 8-bit KV caches with the F16 cache on SmolLM2-135M
 * over 2048 teacher-forced positions of real English text (the GNU GPL v3
 * that Debian ships in /usr/share/common-licenses): at every position the
 * greedy next token with a q8_0 (and an FP8) cache against the one with an
 * F16 cache, and an exact F32 cache's agreement as the yardstick. Two
 * models: the Q4_1 file as installed, whose matmuls quantize their
 * activations to 8 bits (so any change of K/V, even F16 to F32, moves some
 * of those roundings and flips near-ties), and an F16-weight copy of it
 * (made with `brisk quantize IN OUT f16`, argv[1] is the CLI), whose float
 * matmuls take the activations as they are, so the agreement measures the
 * cache alone (an F32 cache agrees on 2047 of 2048 there). Measured, with
 * the rows rotated (quant/kv_quant.h): q8_0 98.73% on the F16 copy (97.66%
 * unrotated), FP8 95.46% (93.70%), short of the 99% goal of issue 19,
 * which this test therefore does not assert; it asserts >= 98.5% for q8_0
 * and >= 94.5% for FP8 on the F16 copy, and on the Q4_1 file q8_0 within
 * 1 point of the F32 cache. For each cache it also prints how near a tie
 * the flipped positions were: the F16 cache's gap between its top two
 * logits there, against the spread of that gap over all positions. The
 * figures printed are those include/brisk.h and docs/kv.md state. Skips
 * when SmolLM2, the text or the CLI is missing. */
#include "test_support.h"

#include "../chat/smollm2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_POS 2048
#define CHUNK 256
#define TEXT "/usr/share/common-licenses/GPL-3"

static const char *cli;

static const brisk_kv_type kinds[] = {BRISK_KV_F16, BRISK_KV_F32, BRISK_KV_Q8_0, BRISK_KV_FP8_E4M3};
static const char *const kind_names[] = {"f16", "f32", "q8_0", "fp8"};

/* The largest logit's index; its lead over the second largest to *gap. */
static int32_t argmax(const float *x, size_t n, float *gap) {
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  float second = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (i != best && x[i] > second) second = x[i];
  *gap = x[best] - second;
  return (int32_t)best;
}

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Each position's greedy token and its lead over the runner-up, the
 * tokens fed CHUNK at a time. */
static void forced_top1(const brisk_model *m, brisk_kv_type kv, const int32_t *toks, int n,
                        int32_t *top1, float *gap) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = kv;
  p.kv_tokens = n;
  p.max_batch_tokens = CHUNK;
  p.n_seq_max = 1;
  brisk_context *c = NULL;
  assert_int_equal(brisk_context_create(m, &p, &c), BRISK_OK);
  const size_t nv = (size_t)brisk_model_n_vocab(m);
  brisk_batch *b;
  assert_int_equal(brisk_batch_create(CHUNK, &b), BRISK_OK);
  for (int t0 = 0; t0 < n; t0 += CHUNK) {
    brisk_batch_clear(b);
    int nt = n - t0 < CHUNK ? n - t0 : CHUNK;
    for (int i = 0; i < nt; i++) brisk_batch_add(b, toks[t0 + i], t0 + i, 0, 1);
    assert_int_equal(brisk_decode(c, b), BRISK_OK);
    for (int i = 0; i < nt; i++) top1[t0 + i] = argmax(brisk_get_logits(c, i), nv, &gap[t0 + i]);
  }
  brisk_batch_free(b);
  brisk_context_free(c);
}

/* The first n tokens of the text, or NULL when it is missing or short. */
static int32_t *text_tokens(const brisk_model *m, int n) {
  FILE *f = fopen(TEXT, "rb");
  if (!f) return NULL;
  char *text = malloc(1 << 20);
  assert_non_null(text);
  size_t len = fread(text, 1, (1 << 20) - 1, f);
  fclose(f);
  size_t cap = len + 16, got = 0;
  int32_t *toks = malloc(cap * sizeof *toks);
  assert_non_null(toks);
  assert_int_equal(brisk_tokenize(m, text, len, toks, cap, BRISK_TOKENIZE_ADD_SPECIAL, &got),
                   BRISK_OK);
  free(text);
  if (got < (size_t)n) {
    free(toks);
    return NULL;
  }
  return toks;
}

/* Agreement (positions of N_POS) of each kind with the F16 cache. */
static void agreement(const char *name, const brisk_model *m, const int32_t *toks, int *agree) {
  int32_t *ref = malloc(N_POS * sizeof *ref), *got = malloc(N_POS * sizeof *got);
  float *gap = malloc(N_POS * sizeof *gap), *gap2 = malloc(N_POS * sizeof *gap2);
  float *sorted = malloc(N_POS * sizeof *sorted);
  assert_true(ref && got && gap && gap2 && sorted);
  forced_top1(m, BRISK_KV_F16, toks, N_POS, ref, gap);
  memcpy(sorted, gap, N_POS * sizeof *gap);
  qsort(sorted, N_POS, sizeof *sorted, cmp_float);
  agree[0] = N_POS;
  for (int k = 1; k < 4; k++) {
    forced_top1(m, kinds[k], toks, N_POS, got, gap2);
    agree[k] = 0;
    float worst = 0; /* the widest F16 lead that a flip overturned */
    for (int t = 0; t < N_POS; t++) {
      agree[k] += ref[t] == got[t];
      if (ref[t] != got[t] && gap[t] > worst) worst = gap[t];
    }
    int below = 0; /* positions whose F16 lead is at most that */
    while (below < N_POS && sorted[below] <= worst) below++;
    fprintf(stderr,
            "%-22s %-5s cache: top-1 agreement with the f16 cache %d / %d (%.2f%%); flips had "
            "f16 leads <= %.3f logits, which %.1f%% of positions have (median lead %.3f)\n",
            name, kind_names[k], agree[k], N_POS, 100.0 * agree[k] / N_POS, (double)worst,
            100.0 * below / N_POS, (double)sorted[N_POS / 2]);
  }
  free(ref), free(got), free(gap), free(gap2), free(sorted);
}

static void test_smollm2_agreement(void **state) {
  (void)state;
  char path[4096];
  if (test_smollm2_path(path, sizeof path)) SKIP_BECAUSE("SmolLM2-135M-Instruct is not installed");
  if (access(TEXT, R_OK) != 0) SKIP_BECAUSE("%s (Debian's base-files) is missing", TEXT);
  if (!cli || access(cli, X_OK) != 0) SKIP_BECAUSE("the brisk CLI was not given");
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  int32_t *toks = text_tokens(m, N_POS);
  if (!toks) {
    brisk_model_free(m);
    SKIP_BECAUSE("%s is shorter than %d tokens", TEXT, N_POS);
  }
  int q41[4], f16w[4];
  agreement("SmolLM2-135M Q4_1", m, toks, q41);
  brisk_model_free(m);
  /* The cache's own effect: within a point of what an exact cache gets. */
  assert_true(q41[2] >= q41[1] - N_POS / 100);

  char dir[] = "/tmp/brisk-kv-agreement-XXXXXX", out[64], cmd[8192];
  assert_non_null(mkdtemp(dir));
  snprintf(out, sizeof out, "%s/smollm2-f16.gguf", dir);
  snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' f16 >/dev/null 2>&1", cli, path, out);
  int rc = system(cmd);
  if (rc != 0) {
    unlink(out), rmdir(dir), free(toks);
    fail_msg("brisk quantize to f16 failed (%d)", rc);
  }
  assert_int_equal(brisk_model_load(out, NULL, &m), BRISK_OK);
  agreement("SmolLM2-135M F16 copy", m, toks, f16w);
  brisk_model_free(m);
  unlink(out), rmdir(dir), free(toks);
  if (f16w[2] * 1000 < N_POS * 985)
    fail_msg("q8_0 agreement %d / %d is under 98.5%%", f16w[2], N_POS);
  if (f16w[3] * 1000 < N_POS * 945)
    fail_msg("fp8 agreement %d / %d is under 94.5%%", f16w[3], N_POS);
  /* An exact cache on float weights: anything but a near-tie flip is a bug. */
  assert_true(f16w[1] >= N_POS - 4);
}

int main(int argc, char **argv) {
  cli = argc > 1 ? argv[1] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_smollm2_agreement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
