/* Large and hostile inputs: many megabytes of text, one huge word, random
 * bytes. Assertions do not depend on timing: outputs are checked exactly
 * (periodic text gives periodic tokens; detokenize restores the input), and
 * the sizes are such that a quadratic algorithm could not finish within the
 * test timeout. */
#include "tok_test_util.h"

#include "tokenizer/pretok.h"
#include "tokenizer/utf8.h"

#include <stdio.h>

#if defined(__SANITIZE_ADDRESS__)
#  define BIG (2u << 20) /* sanitizers are ~10x slower */
#else
#  define BIG (16u << 20)
#endif

/* Byte-level BPE with the GPT-2 pre-tokenizer whose merges spell out the
 * words of `text` left to right. */
static brisk_vocab *gpt2_vocab(const char *text) {
  tvocab t = {0};
  char *ml[256], *mr[256];
  size_t nm = 0;
  for (int b = 0; b < 256; b++) {
    char raw = (char)b, s[8];
    size_t k = brisk_utf8_encode(brisk_byte_to_cp((uint8_t)raw), s);
    tv_add(&t, s, k, BRISK_TOKEN_ATTR_NORMAL, 0);
  }
  for (const char *w = text; *w;) {
    size_t n = 0;
    while (w[n] && w[n] != ' ' && w[n] != '\n') n++;
    char acc[256];
    size_t al = 0;
    for (size_t i = 0; i < n && nm < 256; i++) {
      size_t k = brisk_utf8_encode(brisk_byte_to_cp((uint8_t)w[i]), acc + al);
      if (i > 0) {
        ml[nm] = strndup(acc, al);
        mr[nm] = strndup(acc + al, k);
        nm++;
        if (tv_find(&t, acc, al + k) < 0) tv_add(&t, acc, al + k, BRISK_TOKEN_ATTR_NORMAL, 0);
      }
      al += k;
    }
    w += n;
    while (*w == ' ' || *w == '\n') w++;
  }
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  brisk_vocab_str *s = tv_strs(&t), l[256], r[256];
  for (size_t m = 0; m < nm; m++) {
    l[m] = (brisk_vocab_str){ml[m], strlen(ml[m])};
    r[m] = (brisk_vocab_str){mr[m], strlen(mr[m])};
  }
  d.type = BRISK_VOCAB_BPE;
  d.n_tokens = (uint32_t)t.n;
  d.tokens = s;
  d.attrs = t.attr;
  d.n_merges = nm, d.merge_left = l, d.merge_right = r;
  d.byte_level = true;
  brisk_pretok *pre = NULL;
  assert_int_equal(brisk_pretok_create(&pre), BRISK_OK);
  assert_int_equal(brisk_pretok_add_named(pre, "gpt-2", NULL), BRISK_OK);
  brisk_vocab *v = NULL;
  assert_int_equal(brisk_vocab_build(&d, pre, NULL, 0, &v), BRISK_OK);
  for (size_t m = 0; m < nm; m++) free(ml[m]), free(mr[m]);
  free(s);
  tv_free(&t);
  return v;
}

static void check_roundtrip(const brisk_vocab *v, const char *text, size_t n, const int32_t *t,
                            size_t nt) {
  size_t dn;
  char *back = detok_all(v, t, nt, 0, &dn);
  assert_int_equal(dn, n);
  assert_memory_equal(back, text, n);
  free(back);
}

static void test_megabytes_of_text(void **state) {
  (void)state;
  const char period[] = "hello world, the cat sat on the mat 123 \xC3\xA9t\xC3\xA9\n";
  brisk_vocab *v = gpt2_vocab(period);
  size_t p = strlen(period), reps = BIG / p, n1, n;
  int32_t *one = tok_all(v, period, p, false, false, &n1);
  char *text = malloc(reps * p);
  for (size_t i = 0; i < reps; i++) memcpy(text + i * p, period, p);
  int32_t *t = tok_all(v, text, reps * p, false, false, &n);
  /* The period ends in a newline that the regex keeps apart: periodic. */
  assert_int_equal(n, reps * n1);
  for (size_t i = 0; i < reps; i += reps / 7 + 1)
    assert_memory_equal(t + i * n1, one, n1 * sizeof *t);
  check_roundtrip(v, text, reps * p, t, n);
  free(t), free(one), free(text);
  brisk_vocab_free(v);
}

static void test_one_huge_word(void **state) {
  (void)state;
  /* "abab..." is one \p{L}+ word of megabytes: merged in bounded chunks. */
  brisk_vocab *v = gpt2_vocab("abababab");
  size_t len = BIG / 4, n;
  char *text = malloc(len);
  for (size_t i = 0; i < len; i++) text[i] = "ab"[i & 1];
  int32_t *t = tok_all(v, text, len, false, false, &n);
  assert_true(n > 0 && n < len);
  check_roundtrip(v, text, len, t, n);
  free(t);
  free(text);
  brisk_vocab_free(v);

  /* SPM, one run with no safe cut: forced cuts every MAX_CHUNK units, each
   * chunk an even number of 'a' that pairs up into "aa". */
  tvocab tv = {0};
  tv_add(&tv, "<unk>", 5, BRISK_TOKEN_ATTR_UNKNOWN, 0);
  tv_add(&tv, "\xE2\x96\x81", 3, BRISK_TOKEN_ATTR_NORMAL, -1);
  tv_add(&tv, "a", 1, BRISK_TOKEN_ATTR_NORMAL, -2);
  tv_add(&tv, "aa", 2, BRISK_TOKEN_ATTR_NORMAL, -1);
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  brisk_vocab_str *s = tv_strs(&tv);
  d.type = BRISK_VOCAB_SPM;
  d.n_tokens = (uint32_t)tv.n;
  d.tokens = s, d.scores = tv.score, d.attrs = tv.attr;
  d.add_space_prefix = d.strip_leading_space = d.escape_spaces = d.byte_fallback = true;
  d.special[BRISK_VOCAB_UNK] = 0;
  assert_int_equal(brisk_vocab_build(&d, NULL, NULL, 0, &v), BRISK_OK);
  len = (BIG / 4) / BRISK_TOKENIZER_MAX_CHUNK * BRISK_TOKENIZER_MAX_CHUNK;
  text = malloc(len);
  memset(text, 'a', len);
  t = tok_all(v, text, len, false, false, &n);
  assert_int_equal(n, 1 + len / 2); /* the prefix U+2581, then "aa" tokens */
  assert_int_equal(t[0], 1);
  for (size_t i = 1; i < n; i++) assert_int_equal(t[i], 3);
  check_roundtrip(v, text, len, t, n);
  free(t), free(text), free(s);
  brisk_vocab_free(v);
  tv_free(&tv);
}

static void test_random_bytes(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  brisk_vocab *v = gpt2_vocab("the quick brown fox");
  size_t len = BIG / 16, n;
  char *text = malloc(len);
  for (size_t i = 0; i < len; i++) text[i] = (char)test_rng_u64(&r);
  int32_t *t = tok_all(v, text, len, false, false, &n);
  check_roundtrip(v, text, len, t, n); /* invalid UTF-8 and NULs survive */
  free(t);
  /* Replacement gives valid UTF-8 of the same text where it was valid. */
  size_t dn;
  t = tok_all(v, text, len, false, false, &n);
  char *rep = detok_all(v, t, n, BRISK_DETOK_REPLACE_INVALID, &dn);
  for (size_t i = 0; i < dn;) {
    size_t u = brisk_utf8_seq((const unsigned char *)rep + i, dn - i, NULL);
    assert_true(u > 0);
    i += u;
  }
  free(rep), free(t), free(text);
  brisk_vocab_free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megabytes_of_text),
      cmocka_unit_test(test_one_huge_word),
      cmocka_unit_test(test_random_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
