/* Validation at load: files that once loaded and then failed every decode
 * (a sliding window of 2^32 - 1, an infinite RoPE base or scaling factor,
 * YaRN betas NaN or negative, a rope_freqs tensor of zeros, unaligned F32
 * data under general.alignment 1) are refused by brisk_model_load with a
 * message naming the value; the same files with sane values load and
 * decode. Also the vocabulary against the embedding, in both directions. */
#include "test_models.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static char dir[64];

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

static const char *write_model(const char *file, const test_model_spec *spec) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  test_rng r = test_rng_seeded(file);
  assert_int_equal(test_model_write(path, spec, &r, NULL), BRISK_OK);
  return path;
}

/* Loads with mmap on and off: both refuse with `want` and a message holding
 * `needle`, leaking nothing. */
static void expect_refused(const test_model_spec *s, brisk_status want, const char *needle) {
  const char *path = write_model("bad.gguf", s);
  for (int mmap_on = 0; mmap_on < 2; mmap_on++) {
    brisk_model_params mp;
    brisk_model_params_init(&mp);
    mp.use_mmap = mmap_on;
    brisk_model *m = NULL;
    uint64_t live = brisk_alloc_live_count();
    brisk_status st = brisk_model_load(path, &mp, &m);
    if (st != want || !strstr(brisk_last_error(), needle))
      fprintf(stderr, "want %d with '%s', got %d: %s\n", want, needle, st, brisk_last_error());
    assert_int_equal(st, want);
    assert_non_null(strstr(brisk_last_error(), needle));
    assert_null(m);
    assert_int_equal(brisk_alloc_live_count(), live);
  }
}

/* Decodes a 5-token prompt (longer than a window of 2) and checks that
 * every logit is finite. */
static void expect_decodes(const brisk_model *m) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 64;
  cp.n_threads = 1;
  brisk_context *ctx = NULL;
  brisk_batch *b = NULL;
  assert_int_equal(brisk_context_create(m, &cp, &ctx), BRISK_OK);
  assert_int_equal(brisk_batch_create(8, &b), BRISK_OK);
  for (int32_t i = 0; i < 5; i++)
    assert_int_equal(brisk_batch_add(b, 3 + i, i, 0, i == 4), BRISK_OK);
  brisk_status st = brisk_decode(ctx, b);
  if (st) fprintf(stderr, "decode: %s\n", brisk_last_error());
  assert_int_equal(st, BRISK_OK);
  const float *lg = brisk_get_logits(ctx, 4);
  assert_non_null(lg);
  for (int32_t v = 0; v < brisk_model_n_vocab(m); v++) assert_true(isfinite(lg[v]));
  brisk_batch_free(b);
  brisk_context_free(ctx);
}

static void expect_loads_and_decodes(const test_model_spec *s) {
  const char *path = write_model("good.gguf", s);
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, NULL, &m);
  if (st) fprintf(stderr, "load: %s\n", brisk_last_error());
  assert_int_equal(st, BRISK_OK);
  expect_decodes(m);
  brisk_model_free(m);
}

static void test_sliding_window(void **state) {
  (void)state;
  test_model_spec s = test_model_default("mistral");
  s.sliding_window = UINT32_MAX; /* became -1 as an int32 at decode */
  expect_refused(&s, BRISK_E_FORMAT, "sliding window 4294967295");
  s.sliding_window = 1u << 31;
  expect_refused(&s, BRISK_E_FORMAT, "sliding window");
  s.sliding_window = INT32_MAX; /* larger than any context: full attention */
  expect_loads_and_decodes(&s);
  s.sliding_window = 2;
  expect_loads_and_decodes(&s);
}

static void test_rope_base(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.rope_base = INFINITY;
  expect_refused(&s, BRISK_E_FORMAT, "rope base inf");
  s.rope_base = NAN;
  expect_refused(&s, BRISK_E_FORMAT, "rope base");
  s.rope_base = -10000.0f;
  expect_refused(&s, BRISK_E_FORMAT, "rope base");
  s.rope_base = 1e30f; /* finite: every frequency is tiny but defined */
  expect_loads_and_decodes(&s);
}

/* RoPE scaling keys written by the extra hook. */
typedef struct scaling {
  const char *type;
  float factor, beta_fast, beta_slow;
} scaling;

static void write_scaling(brisk_gguf_writer *w, const char *arch, void *user) {
  const scaling *sc = user;
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  brisk_gguf_writer_set_str(w, key, sc->type);
  snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
  brisk_gguf_writer_set_f32(w, key, sc->factor);
  snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch);
  brisk_gguf_writer_set_u32(w, key, 128);
  if (!strcmp(sc->type, "yarn")) {
    snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_fast", arch);
    brisk_gguf_writer_set_f32(w, key, sc->beta_fast);
    snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_slow", arch);
    brisk_gguf_writer_set_f32(w, key, sc->beta_slow);
  }
}

static void with_scaling(const char *type, float factor, float beta_fast, float beta_slow,
                         const char *needle) {
  scaling sc = {type, factor, beta_fast, beta_slow};
  test_model_spec s = test_model_default("llama");
  s.extra = write_scaling;
  s.extra_user = &sc;
  if (needle)
    expect_refused(&s, BRISK_E_FORMAT, needle);
  else
    expect_loads_and_decodes(&s);
}

static void test_rope_scaling(void **state) {
  (void)state;
  with_scaling("linear", INFINITY, 0, 0, "rope scaling factor inf");
  with_scaling("linear", 0.0f, 0, 0, "rope scaling factor 0");
  with_scaling("linear", 4.0f, 0, 0, NULL);
  with_scaling("yarn", INFINITY, 32.0f, 1.0f, "rope scaling factor inf");
  with_scaling("yarn", 4.0f, NAN, 1.0f, "yarn beta_fast nan");
  with_scaling("yarn", 4.0f, 32.0f, -1.0f, "beta_slow -1");
  with_scaling("yarn", 4.0f, 32.0f, INFINITY, "beta_slow inf");
  with_scaling("yarn", 4.0f, 32.0f, 1.0f, NULL);
}

static void test_rope_freqs(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  float f[8]; /* head_dim 16: 8 pairs */
  s.rope_freqs = f;
  for (int i = 0; i < 8; i++) f[i] = 0.0f;
  expect_refused(&s, BRISK_E_FORMAT, "rope_freqs.weight");
  for (int i = 0; i < 8; i++) f[i] = 1.0f + (float)i;
  f[5] = NAN;
  expect_refused(&s, BRISK_E_FORMAT, "factor 5 is nan");
  f[5] = -2.0f;
  expect_refused(&s, BRISK_E_FORMAT, "factor 5 is -2");
  f[5] = INFINITY;
  expect_refused(&s, BRISK_E_FORMAT, "factor 5 is inf");
  f[5] = 6.0f;
  expect_loads_and_decodes(&s);
}

/* A one-byte tensor ahead of the model's: with general.alignment 1 every
 * later tensor starts at an odd offset. */
static void leading_byte(brisk_gguf_writer *w, const char *arch, void *user) {
  (void)arch;
  (void)user;
  uint64_t ne = 1;
  unsigned char b = 7;
  brisk_gguf_writer_add_tensor(w, "aaa.pad", BRISK_DTYPE_I8, 1, &ne, &b, 1);
}

static void test_alignment(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.alignment = 1;
  s.extra = leading_byte;
  expect_refused(&s, BRISK_E_FORMAT, "not aligned to 4 bytes");
  s.weight_type = BRISK_DTYPE_F16; /* the matrices' halves too, named first */
  expect_refused(&s, BRISK_E_FORMAT, "not aligned");
  /* The smallest alignment that keeps floats aligned is fine. */
  s = test_model_default("llama");
  s.alignment = 4;
  s.extra = leading_byte;
  expect_loads_and_decodes(&s);
  s.alignment = 1;
  /* Quantized blocks are read bytewise: odd offsets are allowed for them,
   * but the F32 norms after them still are not. */
  s.weight_type = BRISK_DTYPE_Q8_0;
  expect_refused(&s, BRISK_E_FORMAT, "f32 data is not aligned");
}

/* The vocabulary against the embedding: more tokens than rows is refused;
 * fewer (a padded embedding) become the model's n_vocab, so logits, sampling
 * and submitted ids cover exactly the tokens with text. */
static void test_vocab_vs_embedding(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.vocab_tokens = s.n_vocab + 5;
  expect_refused(&s, BRISK_E_FORMAT, "vocabulary has 101 tokens but the embedding only 96");
  s.tied = true;
  expect_refused(&s, BRISK_E_FORMAT, "embedding only 96 rows");

  for (int tied = 0; tied < 2; tied++) {
    s = test_model_default("llama");
    s.tied = tied;
    s.vocab_tokens = s.n_vocab - 13;
    s.weight_type = BRISK_DTYPE_Q8_0; /* packed at load: rows past the vocabulary are not */
    const char *path = write_model("padded.gguf", &s);
    brisk_model *m = NULL;
    assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
    assert_int_equal(brisk_model_n_vocab(m), 83);
    expect_decodes(m);
    /* Every id that can be sampled has a text; the first one past is refused. */
    char buf[64];
    size_t n;
    for (int32_t t = 0; t < brisk_model_n_vocab(m); t++)
      assert_int_equal(brisk_token_to_piece(m, t, 0, buf, sizeof buf, &n), BRISK_OK);
    assert_int_equal(brisk_token_to_piece(m, 83, 0, buf, sizeof buf, &n), BRISK_E_INVALID_ARGUMENT);
    brisk_model_free(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sliding_window), cmocka_unit_test(test_rope_base),
      cmocka_unit_test(test_rope_scaling),   cmocka_unit_test(test_rope_freqs),
      cmocka_unit_test(test_alignment),      cmocka_unit_test(test_vocab_vs_embedding),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
