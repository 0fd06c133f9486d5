/* Tokenizer algorithms on vocabularies built in code: SPM and BPE against
 * naive reference implementations on fresh random inputs, special tokens,
 * bad input, detokenization and streaming, tokenizer.json loading, split
 * behaviors, and allocation failures. */
#include "tok_test_util.h"

#include "core/alloc.h"
#include "tokenizer/pretok.h"
#include "tokenizer/utf8.h"

#include <stdio.h>

static const char SP[] = "\xE2\x96\x81"; /* U+2581 */

/* ---- SPM ---- */

/* A random SPM vocabulary over the units U+2581, a, b, c: byte tokens first
 * (ids 0..255), then <unk> <s> </s> <t> (user-defined), then pieces. */
static void spm_vocab(test_rng *r, tvocab *t) {
  char buf[64];
  for (int b = 0; b < 256; b++) {
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    tv_add(t, buf, strlen(buf), BRISK_TOKEN_ATTR_BYTE, 0);
  }
  tv_add(t, "<unk>", 5, BRISK_TOKEN_ATTR_UNKNOWN, 0);
  tv_add(t, "<s>", 3, BRISK_TOKEN_ATTR_CONTROL, 0);
  tv_add(t, "</s>", 4, BRISK_TOKEN_ATTR_CONTROL, 0);
  tv_add(t, "<t>", 3, BRISK_TOKEN_ATTR_USER_DEFINED, 0);
  const char *units[] = {SP, "a", "b", "c"};
  for (int i = 0; i < 4; i++) tv_add(t, units[i], strlen(units[i]), BRISK_TOKEN_ATTR_NORMAL, -50);
  for (int k = 0; k < 80; k++) {
    size_t len = 0, nu = 2 + test_rng_u64(r) % 5;
    for (size_t i = 0; i < nu; i++) {
      const char *u = units[test_rng_u64(r) % 4];
      memcpy(buf + len, u, strlen(u));
      len += strlen(u);
    }
    if (tv_find(t, buf, len) >= 0) continue;
    /* Few distinct scores, so that ties (leftmost wins) happen. */
    tv_add(t, buf, len, BRISK_TOKEN_ATTR_NORMAL, -(float)(test_rng_u64(r) % 12));
  }
}

static brisk_vocab *build_spm(const tvocab *t) {
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  brisk_vocab_str *s = tv_strs(t);
  d.type = BRISK_VOCAB_SPM;
  d.n_tokens = (uint32_t)t->n;
  d.tokens = s;
  d.scores = t->score;
  d.attrs = t->attr;
  d.special[BRISK_VOCAB_UNK] = 256;
  d.special[BRISK_VOCAB_BOS] = 257;
  d.special[BRISK_VOCAB_EOS] = 258;
  d.add_bos = true;
  d.add_space_prefix = d.strip_leading_space = d.escape_spaces = d.byte_fallback = true;
  brisk_vocab *v = NULL;
  assert_int_equal(brisk_vocab_build(&d, NULL, NULL, 0, &v), BRISK_OK);
  free(s);
  return v;
}

/* Naive SPM: rescan all pairs for the best score (leftmost on ties). */
static size_t spm_reference(const tvocab *t, const char *text, size_t n, int32_t *out) {
  char **sym = malloc((n + 2) * sizeof *sym);
  size_t ns = 0;
  sym[ns++] = strdup(SP); /* add_space_prefix */
  for (size_t i = 0; i < n;) {
    size_t k = brisk_utf8_unit((const unsigned char *)text + i, n - i);
    if (text[i] == ' ') {
      sym[ns++] = strdup(SP);
    } else {
      sym[ns] = malloc(k + 1);
      memcpy(sym[ns], text + i, k);
      sym[ns++][k] = '\0';
    }
    i += k;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
      char cat[256];
      snprintf(cat, sizeof cat, "%s%s", sym[i], sym[i + 1]);
      int32_t id = tv_find(t, cat, strlen(cat));
      if (id < 0 || t->attr[id] != BRISK_TOKEN_ATTR_NORMAL) continue;
      if (best < 0 || t->score[id] > best_score) best = (int)i, best_score = t->score[id];
    }
    if (best < 0) break;
    char *cat = malloc(strlen(sym[best]) + strlen(sym[best + 1]) + 1);
    strcpy(cat, sym[best]);
    strcat(cat, sym[best + 1]);
    free(sym[best]);
    free(sym[best + 1]);
    sym[best] = cat;
    memmove(sym + best + 1, sym + best + 2, (ns - best - 2) * sizeof *sym);
    ns--;
  }
  size_t m = 0;
  for (size_t i = 0; i < ns; i++) {
    int32_t id = tv_find(t, sym[i], strlen(sym[i]));
    if (id >= 0 && t->attr[id] == BRISK_TOKEN_ATTR_NORMAL) {
      out[m++] = id;
    } else {
      for (const char *p = sym[i]; *p; p++) out[m++] = (uint8_t)*p; /* byte tokens */
    }
    free(sym[i]);
  }
  free(sym);
  return m;
}

static void random_text(test_rng *r, const char *const *alpha, size_t n_alpha, size_t units,
                        char *buf, size_t *len) {
  *len = 0;
  for (size_t i = 0; i < units; i++) {
    const char *u = alpha[test_rng_u64(r) % n_alpha];
    size_t k = strlen(u) ? strlen(u) : 1; /* "" stands for a NUL byte */
    memcpy(buf + *len, u, k);
    *len += k;
  }
}

static void test_spm_matches_reference(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  const char *alpha[] = {"a", "b", "c", " ", "d", "\xC3\xA9", "\xFF"};
  for (int round = 0; round < 4; round++) {
    tvocab t = {0};
    spm_vocab(&r, &t);
    brisk_vocab *v = build_spm(&t);
    char text[4096];
    int32_t want[8192];
    for (int k = 0; k < 60; k++) {
      size_t units = k < 50 ? test_rng_u64(&r) % 40 : 200 + test_rng_u64(&r) % 400;
      size_t len;
      random_text(&r, alpha, 7, units, text, &len);
      if (len == 0) continue; /* empty text: no prefix, no tokens (checked elsewhere) */
      size_t nw = spm_reference(&t, text, len, want), n;
      int32_t *got = tok_all(v, text, len, false, false, &n);
      assert_int_equal(n, nw);
      assert_memory_equal(got, want, n * sizeof *got);
      /* Lossless: the prefix space comes off again; invalid bytes survive. */
      size_t dn;
      char *back = detok_all(v, got, n, 0, &dn);
      assert_int_equal(dn, len);
      assert_memory_equal(back, text, len);
      free(back);
      free(got);
    }
    brisk_vocab_free(v);
    tv_free(&t);
  }
}

/* ---- byte-level BPE ---- */

static void bl_text(const char *raw, size_t n, char *out, size_t *len) {
  *len = 0;
  for (size_t i = 0; i < n; i++)
    *len += brisk_utf8_encode(brisk_byte_to_cp((uint8_t)raw[i]), out + *len);
}

typedef struct bpe_case {
  tvocab t;
  char **ml, **mr; /* [n_merges] */
  size_t n_merges;
} bpe_case;

/* Byte tokens for all 256 bytes (id = byte), then random merges of tokens
 * built only from the bytes of `alphabet`. */
static void bpe_vocab(test_rng *r, bpe_case *c, const char *alphabet, size_t n_alpha) {
  memset(c, 0, sizeof *c);
  for (int b = 0; b < 256; b++) {
    char raw = (char)b, s[8];
    size_t len;
    bl_text(&raw, 1, s, &len);
    tv_add(&c->t, s, len, BRISK_TOKEN_ATTR_NORMAL, 0);
  }
  int32_t *pool = malloc(1024 * sizeof *pool);
  size_t np = 0;
  for (size_t i = 0; i < n_alpha; i++) pool[np++] = (uint8_t)alphabet[i];
  c->ml = malloc(400 * sizeof *c->ml);
  c->mr = malloc(400 * sizeof *c->mr);
  for (int k = 0; k < 400; k++) {
    int32_t a = pool[test_rng_u64(r) % np], b = pool[test_rng_u64(r) % np];
    bool dup = false;
    for (size_t m = 0; m < c->n_merges && !dup; m++)
      dup = strcmp(c->ml[m], c->t.text[a]) == 0 && strcmp(c->mr[m], c->t.text[b]) == 0;
    if (dup) continue;
    char cat[512];
    snprintf(cat, sizeof cat, "%s%s", c->t.text[a], c->t.text[b]);
    if (strlen(cat) > 40) continue;
    c->ml[c->n_merges] = strdup(c->t.text[a]);
    c->mr[c->n_merges] = strdup(c->t.text[b]);
    c->n_merges++;
    if (tv_find(&c->t, cat, strlen(cat)) < 0)
      pool[np++] = tv_add(&c->t, cat, strlen(cat), BRISK_TOKEN_ATTR_NORMAL, 0);
  }
  free(pool);
}

static void bpe_case_free(bpe_case *c) {
  for (size_t m = 0; m < c->n_merges; m++) free(c->ml[m]), free(c->mr[m]);
  free(c->ml);
  free(c->mr);
  tv_free(&c->t);
}

static brisk_vocab *build_bpe(const bpe_case *c, brisk_pretok *pre) {
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  brisk_vocab_str *s = tv_strs(&c->t);
  brisk_vocab_str *l = malloc((c->n_merges + 1) * sizeof *l),
                  *r = malloc((c->n_merges + 1) * sizeof *r);
  for (size_t m = 0; m < c->n_merges; m++) {
    l[m] = (brisk_vocab_str){c->ml[m], strlen(c->ml[m])};
    r[m] = (brisk_vocab_str){c->mr[m], strlen(c->mr[m])};
  }
  d.type = BRISK_VOCAB_BPE;
  d.n_tokens = (uint32_t)c->t.n;
  d.tokens = s;
  d.attrs = c->t.attr;
  d.n_merges = c->n_merges;
  d.merge_left = l, d.merge_right = r;
  d.byte_level = true;
  brisk_vocab *v = NULL;
  assert_int_equal(brisk_vocab_build(&d, pre, NULL, 0, &v), BRISK_OK);
  free(s);
  free(l);
  free(r);
  return v;
}

/* Naive BPE on one word: repeatedly merge the lowest-ranked pair, leftmost. */
static size_t bpe_reference(const bpe_case *c, const char *raw, size_t n, int32_t *out) {
  char **sym = malloc((n + 1) * sizeof *sym);
  for (size_t i = 0; i < n; i++) {
    char s[8];
    size_t len;
    bl_text(raw + i, 1, s, &len);
    sym[i] = strndup(s, len);
  }
  size_t ns = n;
  for (;;) {
    size_t best_rank = SIZE_MAX, best = 0;
    for (size_t i = 0; i + 1 < ns; i++)
      for (size_t m = 0; m < c->n_merges && m < best_rank; m++)
        if (strcmp(c->ml[m], sym[i]) == 0 && strcmp(c->mr[m], sym[i + 1]) == 0)
          best_rank = m, best = i;
    if (best_rank == SIZE_MAX) break;
    char *cat = malloc(strlen(sym[best]) + strlen(sym[best + 1]) + 1);
    strcpy(cat, sym[best]);
    strcat(cat, sym[best + 1]);
    free(sym[best]);
    free(sym[best + 1]);
    sym[best] = cat;
    memmove(sym + best + 1, sym + best + 2, (ns - best - 2) * sizeof *sym);
    ns--;
  }
  for (size_t i = 0; i < ns; i++) {
    out[i] = tv_find(&c->t, sym[i], strlen(sym[i]));
    free(sym[i]);
  }
  free(sym);
  return ns;
}

static void test_bpe_matches_reference(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  const char alphabet[] = {'a', 'b', 'c', ' ', '\0', (char)0xFF, (char)0xC3, (char)0xA9};
  const char *alpha[] = {"a", "b", "c", " ", "", "\xFF", "\xC3", "\xA9", "\xC3\xA9"};
  for (int round = 0; round < 4; round++) {
    bpe_case c;
    bpe_vocab(&r, &c, alphabet, sizeof alphabet);
    brisk_vocab *v = build_bpe(&c, NULL); /* no pre-tokenizer: the text is one word */
    char text[2048];
    int32_t want[2048];
    for (int k = 0; k < 40; k++) {
      size_t units = k < 34 ? test_rng_u64(&r) % 30 : 300 + test_rng_u64(&r) % 300;
      size_t len;
      random_text(&r, alpha, 9, units, text, &len);
      size_t nw = bpe_reference(&c, text, len, want), n;
      int32_t *got = tok_all(v, text, len, false, false, &n);
      assert_int_equal(n, nw);
      assert_memory_equal(got, want, n * sizeof *got);
      size_t dn;
      char *back = detok_all(v, got, n, 0, &dn);
      assert_int_equal(dn, len);
      assert_memory_equal(back, text, len);
      free(back);
      free(got);
    }
    brisk_vocab_free(v);
    bpe_case_free(&c);
  }
}

/* ---- special tokens and arguments ---- */

static void test_special_tokens(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tvocab t = {0};
  spm_vocab(&r, &t);
  int32_t longer = tv_add(&t, "<s>>", 4, BRISK_TOKEN_ATTR_CONTROL, 0);
  brisk_vocab *v = build_spm(&t);
  size_t n, na, nb;
  /* Without parse_special a control text is plain text: byte tokens here. */
  int32_t *p = tok_all(v, "a<s>b", 5, false, false, &n);
  for (size_t i = 0; i < n; i++) assert_true(p[i] != 257 && p[i] != longer);
  size_t dn;
  char *back = detok_all(v, p, n, 0, &dn);
  assert_int_equal(dn, 5);
  assert_memory_equal(back, "a<s>b", 5);
  free(back), free(p);
  /* With it, the token is cut out; text after it gets the prefix space again. */
  int32_t *a = tok_all(v, "a", 1, false, false, &na);
  int32_t *b = tok_all(v, "b", 1, false, false, &nb);
  p = tok_all(v, "a<s>b", 5, false, true, &n);
  assert_int_equal(n, na + 1 + nb);
  assert_memory_equal(p, a, na * sizeof *a);
  assert_int_equal(p[na], 257);
  assert_memory_equal(p + na + 1, b, nb * sizeof *b);
  back = detok_all(v, p, n, BRISK_DETOK_RENDER_SPECIAL, &dn);
  assert_int_equal(dn, 5);
  assert_memory_equal(back, "a<s>b", 5);
  free(back);
  back = detok_all(v, p, n, 0, &dn); /* control tokens render empty */
  assert_int_equal(dn, 2);
  assert_memory_equal(back, "ab", 2);
  free(back), free(p);
  /* Longest match first. */
  p = tok_all(v, "<s>>", 4, false, true, &n);
  assert_int_equal(n, 1);
  assert_int_equal(p[0], longer);
  free(p);
  /* User-defined tokens are recognized even without parse_special. */
  p = tok_all(v, "<t>", 3, false, false, &n);
  assert_int_equal(n, 1);
  assert_int_equal(p[0], 259);
  free(p);
  /* add_special: BOS from the vocab; empty text gives BOS alone. */
  p = tok_all(v, NULL, 0, true, false, &n);
  assert_int_equal(n, 1);
  assert_int_equal(p[0], 257);
  free(p);
  p = tok_all(v, "ab", 2, true, false, &n);
  back = detok_all(v, p, n, BRISK_DETOK_REMOVE_SPECIAL, &dn);
  assert_int_equal(dn, 2);
  assert_memory_equal(back, "ab", 2);
  assert_true(brisk_vocab_is_eog(v, 258));
  assert_false(brisk_vocab_is_eog(v, 257));
  assert_int_equal(brisk_vocab_token_attr(v, 259), BRISK_TOKEN_ATTR_USER_DEFINED);
  assert_int_equal(brisk_vocab_token_attr(v, -1), 0);
  free(back), free(p), free(a), free(b);
  brisk_vocab_free(v);
  tv_free(&t);
}

static void test_arguments_and_capacity(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tvocab t = {0};
  spm_vocab(&r, &t);
  brisk_vocab *v = build_spm(&t);
  size_t n, need = 99;
  int32_t *full = tok_all(v, "abc cab", 7, true, false, &n);
  assert_true(n >= 3);
  int32_t one[1] = {-7};
  assert_int_equal(brisk_vocab_tokenize(v, "abc cab", 7, true, false, one, 1, &need),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(need, n);
  assert_int_equal(one[0], full[0]);
  assert_non_null(strstr(brisk_last_error(), "do not fit"));
  assert_int_equal(brisk_vocab_tokenize(v, "abc cab", 7, true, false, NULL, 0, &need),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(need, n);
  assert_int_equal(brisk_vocab_tokenize(v, NULL, 0, false, false, NULL, 0, &need), BRISK_OK);
  assert_int_equal(need, 0);
  assert_int_equal(brisk_vocab_tokenize(v, NULL, 3, false, false, one, 1, &need),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_vocab_tokenize(v, "a", 1, false, false, NULL, 4, &need),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_vocab_tokenize(v, "a", 1, false, false, one, 1, NULL),
                   BRISK_E_INVALID_ARGUMENT);
  /* Detokenize: bad ids are named, short buffers report the size. */
  int32_t bad[2] = {full[0], 100000};
  char buf[4];
  assert_int_equal(brisk_vocab_detokenize(v, bad, 2, 0, buf, 4, &need), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "100000"));
  assert_int_equal(brisk_vocab_detokenize(v, full, n, 0, buf, 2, &need), BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(need, 7);
  assert_int_equal(brisk_vocab_token_to_piece(v, 3000, false, buf, 4, &need),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_vocab_token_to_piece(v, 0x41, false, buf, 4, &need), BRISK_OK);
  assert_int_equal(need, 1);
  assert_int_equal(buf[0], 'A'); /* <0x41> renders as the byte */
  assert_null(brisk_vocab_piece(v, -1, true, &need));
  free(full);
  brisk_vocab_free(v);
  tv_free(&t);
}

/* ---- streaming ---- */

static void stream_all(const brisk_vocab *v, const int32_t *toks, size_t n, uint32_t flags,
                       char *out, size_t *len, bool check_valid) {
  brisk_detok_stream *s = NULL;
  assert_int_equal(brisk_detok_stream_create(v, flags, &s), BRISK_OK);
  *len = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *p;
    size_t k;
    if (i < n)
      assert_int_equal(brisk_detok_stream_push(s, toks[i], &p, &k), BRISK_OK);
    else
      assert_int_equal(brisk_detok_stream_flush(s, &p, &k), BRISK_OK);
    /* Every release of valid text is itself complete UTF-8. */
    for (size_t j = 0; check_valid && j < k;) {
      size_t u = brisk_utf8_seq((const unsigned char *)p + j, k - j, NULL);
      assert_true(u > 0);
      j += u;
    }
    memcpy(out + *len, p, k);
    *len += k;
  }
  brisk_detok_stream_free(s);
}

static void test_stream_matches_detokenize(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  const char alphabet[] = {'a',        'b',        ' ',        (char)0xC3,
                           (char)0xA9, (char)0xE2, (char)0x82, (char)0xAC};
  bpe_case c;
  bpe_vocab(&r, &c, alphabet, sizeof alphabet);
  brisk_vocab *v = build_bpe(&c, NULL);
  const char *alpha[] = {"a", "b", " ", "\xC3\xA9", "\xE2\x82\xAC"}; /* valid UTF-8 only */
  char text[1024], out[4096];
  for (int k = 0; k < 50; k++) {
    size_t len, n, ol;
    random_text(&r, alpha, 5, test_rng_u64(&r) % 60, text, &len);
    int32_t *toks = tok_all(v, text, len, false, false, &n);
    stream_all(v, toks, n, 0, out, &ol, true);
    assert_int_equal(ol, len);
    assert_memory_equal(out, text, len);
    free(toks);
  }
  /* Random token sequences (invalid UTF-8 likely): stream == detokenize, raw
   * and with replacement. */
  for (int k = 0; k < 50; k++) {
    int32_t toks[40];
    size_t n = test_rng_u64(&r) % 40, dn, ol;
    for (size_t i = 0; i < n; i++) toks[i] = (int32_t)(test_rng_u64(&r) % c.t.n);
    for (int rep = 0; rep < 2; rep++) {
      uint32_t flags = rep ? BRISK_DETOK_REPLACE_INVALID : 0;
      char *want = detok_all(v, toks, n, flags, &dn);
      stream_all(v, toks, n, flags, out, &ol, rep == 1);
      assert_int_equal(ol, dn);
      assert_memory_equal(out, want, dn);
      free(want);
    }
  }
  /* A split sequence is held back until complete. */
  brisk_detok_stream *s;
  const char *p;
  size_t k;
  assert_int_equal(brisk_detok_stream_create(v, 0, &s), BRISK_OK);
  assert_int_equal(brisk_detok_stream_push(s, 0xE2, &p, &k), BRISK_OK);
  assert_int_equal(k, 0);
  assert_int_equal(brisk_detok_stream_push(s, 0x82, &p, &k), BRISK_OK);
  assert_int_equal(k, 0);
  assert_int_equal(brisk_detok_stream_push(s, 0xAC, &p, &k), BRISK_OK);
  assert_int_equal(k, 3);
  assert_memory_equal(p, "\xE2\x82\xAC", 3);
  assert_int_equal(brisk_detok_stream_push(s, 0xE2, &p, &k), BRISK_OK);
  assert_int_equal(brisk_detok_stream_push(s, -1, &p, &k), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_detok_stream_flush(s, &p, &k), BRISK_OK);
  assert_int_equal(k, 1); /* an incomplete sequence comes out as is at the end */
  brisk_detok_stream_free(s);
  int32_t ff = 0xFF;
  size_t dn;
  char *rep = detok_all(v, &ff, 1, BRISK_DETOK_REPLACE_INVALID, &dn);
  assert_int_equal(dn, 3);
  assert_memory_equal(rep, "\xEF\xBF\xBD", 3);
  free(rep);
  brisk_vocab_free(v);
  bpe_case_free(&c);
}

/* ---- pre-tokenizer behaviors ---- */

typedef struct pieces {
  char buf[512];
  size_t n;
} pieces;

static brisk_status collect(void *ctx, const char *s, size_t n) {
  pieces *p = ctx;
  memcpy(p->buf + p->n, s, n);
  p->n += n;
  p->buf[p->n++] = '|';
  p->buf[p->n] = '\0';
  return BRISK_OK;
}

static void expect_split(const char *pattern, bool literal, brisk_split_behavior b, bool invert,
                         const char *text, const char *want) {
  brisk_pretok *p = NULL;
  brisk_pretok_ws *ws = NULL;
  assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
  assert_int_equal(brisk_pretok_add(p, pattern, literal, b, invert), BRISK_OK);
  assert_int_equal(brisk_pretok_ws_create(p, &ws), BRISK_OK);
  pieces got = {{0}, 0};
  assert_int_equal(brisk_pretok_run(p, ws, text, strlen(text), collect, &got), BRISK_OK);
  assert_string_equal(got.buf, want);
  brisk_pretok_ws_free(ws);
  brisk_pretok_free(p);
}

static void test_split_behaviors(void **state) {
  (void)state;
  /* The examples of Hugging Face's SplitDelimiterBehavior documentation. */
  const char *s = "the-final--countdown";
  expect_split("-", true, BRISK_SPLIT_REMOVED, false, s, "the|final|countdown|");
  expect_split("-", true, BRISK_SPLIT_ISOLATED, false, s, "the|-|final|-|-|countdown|");
  expect_split("-", true, BRISK_SPLIT_MERGED_PREVIOUS, false, s, "the-|final-|-|countdown|");
  expect_split("-", true, BRISK_SPLIT_MERGED_NEXT, false, s, "the|-final|-|-countdown|");
  expect_split("-", true, BRISK_SPLIT_CONTIGUOUS, false, s, "the|-|final|--|countdown|");
  expect_split("-", true, BRISK_SPLIT_REMOVED, true, s, "-|-|-|");
  /* Empty matches split at positions (superbpe's digit grouping). */
  expect_split("(?=(\\d{3})+(?!\\d))", false, BRISK_SPLIT_ISOLATED, false, "1234567", "1|234|567|");
  /* A lookahead sees the end of its piece. */
  expect_split(brisk_pretok_bytelevel_pattern, false, BRISK_SPLIT_ISOLATED, false,
               "Hello  world's 42\n", "Hello| | world|'s| 42|\n|");
  /* Invalid UTF-8 never matches: it stays in the gaps. */
  expect_split("\\p{L}+", false, BRISK_SPLIT_ISOLATED, false,
               "ab\xFF"
               "cd",
               "ab|\xFF|cd|");
  brisk_pretok *p = NULL;
  assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
  assert_int_equal(brisk_pretok_add(p, "(unclosed", false, BRISK_SPLIT_ISOLATED, false),
                   BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "(unclosed"));
  brisk_pretok_free(p);
}

static void test_named_pre_tokenizers(void **state) {
  (void)state;
  /* Every known name compiles (the tables are checked in test_pretok_names). */
  assert_true(brisk_pretok_n_names() >= 91);
  for (size_t i = 0; i < brisk_pretok_n_names(); i++) {
    const char *name = brisk_pretok_name_at(i);
    brisk_pretok *p = NULL;
    brisk_pretok_info info;
    assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
    if (brisk_pretok_add_named(p, name, &info) != BRISK_OK) {
      fprintf(stderr, "%s: %s\n", name, brisk_last_error());
      fail();
    }
    assert_true(brisk_pretok_n_steps(p) >= 1);
    brisk_pretok_free(p);
  }
  assert_null(brisk_pretok_name_at(brisk_pretok_n_names()));
  brisk_pretok *p = NULL;
  assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
  assert_int_equal(brisk_pretok_add_named(p, "no-such-pre", NULL), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "no-such-pre"));
  brisk_pretok_free(p);
}

/* ---- tokenizer.json ---- */

static const char k_json_bl[] =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":6,\"content\":\"<|end|>\",\"special\":true,"
    "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"single_word\":false},"
    "{\"id\":7,\"content\":\"<x>\",\"special\":false,\"lstrip\":true,\"rstrip\":true}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
    "\"use_regex\":true},\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
    "\"vocab\":{\"a\":0,\"b\":1,\"\xC4\xA0\":2,\"ab\":3,\"\xC4\xA0"
    "ab\":4,\"c\":5},"
    "\"merges\":%s}}";

static brisk_vocab *hf_load(const char *fmt, const char *arg) {
  char json[4096];
  snprintf(json, sizeof json, fmt, arg);
  brisk_vocab *v = NULL;
  brisk_status st = brisk_vocab_from_hf_json(json, strlen(json), &v);
  if (st != BRISK_OK) fprintf(stderr, "%s\n", brisk_last_error());
  assert_int_equal(st, BRISK_OK);
  return v;
}

static void test_hf_json_bytelevel(void **state) {
  (void)state;
  const char *merge_forms[] = {"[\"a b\",\"\xC4\xA0 ab\"]",
                               "[[\"a\",\"b\"],[\"\xC4\xA0\",\"ab\"]]"};
  for (int f = 0; f < 2; f++) {
    brisk_vocab *v = hf_load(k_json_bl, merge_forms[f]);
    assert_int_equal(brisk_vocab_n_tokens(v), 8);
    size_t n, dn;
    const char text[] = "ab ab<|end|>c";
    int32_t *t = tok_all(v, text, strlen(text), false, true, &n);
    int32_t want[] = {3, 4, 6, 5};
    assert_int_equal(n, 4);
    assert_memory_equal(t, want, sizeof want);
    char *back = detok_all(v, t, n, BRISK_DETOK_RENDER_SPECIAL, &dn);
    assert_int_equal(dn, strlen(text));
    assert_memory_equal(back, text, dn);
    free(back), free(t);
    /* lstrip/rstrip: the spaces around <x> are eaten. */
    t = tok_all(v, "ab <x> ab", 9, false, false, &n);
    int32_t want2[] = {3, 7, 3};
    assert_int_equal(n, 3);
    assert_memory_equal(t, want2, sizeof want2);
    free(t);
    assert_int_equal(brisk_vocab_token_attr(v, 6), BRISK_TOKEN_ATTR_CONTROL);
    brisk_vocab_free(v);
  }
}

static const char k_json_meta[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
    "{\"id\":1,\"content\":\"<s>\",\"special\":true}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":"
    "\"\xE2\x96\x81\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":"
    "\"\xE2\x96\x81\"}]},\"pre_tokenizer\":null,"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
    "\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],"
    "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
    "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
    "{\"String\":\"\xE2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},"
    "{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
    "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,\"fuse_unk\":true,"
    "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"<0x41>\":2,\"\xE2\x96\x81\":3,\"h\":4,\"i\":5,"
    "\"\xE2\x96\x81h\":6,\"\xE2\x96\x81hi\":7},\"merges\":[\"\xE2\x96\x81 h\",\"\xE2\x96\x81h "
    "i\"]}}";

static void test_hf_json_spm_like(void **state) {
  (void)state;
  brisk_vocab *v = NULL;
  assert_int_equal(brisk_vocab_from_hf_json(k_json_meta, strlen(k_json_meta), &v), BRISK_OK);
  assert_true(brisk_vocab_adds_bos(v));
  assert_int_equal(brisk_vocab_special_id(v, BRISK_VOCAB_BOS), 1);
  size_t n, dn;
  int32_t *t = tok_all(v, "hi hi", 5, true, false, &n);
  int32_t want[] = {1, 7, 7};
  assert_int_equal(n, 3);
  assert_memory_equal(t, want, sizeof want);
  char *back = detok_all(v, t, n, BRISK_DETOK_REMOVE_SPECIAL, &dn);
  assert_int_equal(dn, 5);
  assert_memory_equal(back, "hi hi", 5);
  free(back), free(t);
  /* Byte fallback for 'A'; unknown (fused) for what has no byte token. */
  t = tok_all(v, "A", 1, false, false, &n);
  int32_t want2[] = {3, 2};
  assert_int_equal(n, 2);
  assert_memory_equal(t, want2, sizeof want2);
  free(t);
  t = tok_all(v, "zz", 2, false, false, &n);
  int32_t want3[] = {3, 0};
  assert_int_equal(n, 2);
  assert_memory_equal(t, want3, sizeof want3);
  free(t);
  brisk_vocab_free(v);
}

/* Text that no token covers, in a vocabulary without an unknown token or
 * byte tokens, fails the call instead of vanishing from the output. */
static void test_uncovered_text_fails(void **state) {
  (void)state;
  brisk_vocab *v = hf_load(k_json_bl, "[\"a b\",\"\xC4\xA0 ab\"]");
  int32_t out[16];
  size_t n = 77;
  assert_int_equal(brisk_vocab_tokenize(v, "ab z", 4, false, false, out, 16, &n),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "no token covers 'z'"));
  assert_int_equal(n, 77);
  assert_int_equal(brisk_vocab_tokenize(v, "\xFF", 1, false, false, out, 16, &n),
                   BRISK_E_UNSUPPORTED);
  /* Covered text still works, and so does the empty text. */
  assert_int_equal(brisk_vocab_tokenize(v, "ab cab", 6, false, false, out, 16, &n), BRISK_OK);
  int32_t want[] = {3, 2, 5, 3}; /* ab, U+0120 (space), c, ab */
  assert_int_equal(n, 4);
  assert_memory_equal(out, want, sizeof want);
  assert_int_equal(brisk_vocab_tokenize(v, "", 0, false, false, out, 16, &n), BRISK_OK);
  assert_int_equal(n, 0);
  brisk_vocab_free(v);
}

/* A tokenizer.json whose normalizers are `n` chained Replace("a" ->
 * content), with a vocabulary of "a" and "aa". */
static brisk_vocab *growing_vocab(int n_replace, const char *content, brisk_status *st) {
  char json[8192];
  size_t k = (size_t)snprintf(json, sizeof json,
                              "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[");
  for (int i = 0; i < n_replace; i++)
    k += (size_t)snprintf(json + k, sizeof json - k,
                          "%s{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},"
                          "\"content\":\"%s\"}",
                          i ? "," : "", content);
  snprintf(json + k, sizeof json - k,
           "]},\"pre_tokenizer\":null,\"decoder\":null,\"model\":{\"type\":\"BPE\","
           "\"unk_token\":null,\"vocab\":{\"a\":0,\"aa\":1},\"merges\":[\"a a\"]}}");
  brisk_vocab *v = NULL;
  *st = brisk_vocab_from_hf_json(json, strlen(json), &v);
  return v;
}

/* Eight chained doubling Replaces turned a one-byte prompt into 256 bytes
 * and a 16 MB one into 4 GB; the normalizers may now grow a fragment to 4x
 * its length + 1024 bytes, and past that the call fails at once. */
static void test_normalizer_amplification(void **state) {
  (void)state;
  brisk_status st;
  brisk_vocab *v = growing_vocab(8, "aa", &st);
  assert_int_equal(st, BRISK_OK);
  int32_t out[1024];
  size_t n = 0;
  /* One byte -> 256: within the 1024 bytes of slack. */
  assert_int_equal(brisk_vocab_tokenize(v, "a", 1, false, false, out, 1024, &n), BRISK_OK);
  assert_int_equal(n, 128); /* 256 a's merged in pairs */
  /* 5 bytes -> 1280 > 4 * 5 + 1024: refused, before allocating it. */
  uint64_t live = brisk_alloc_live_bytes();
  assert_int_equal(brisk_vocab_tokenize(v, "aaaaa", 5, false, false, out, 1024, &n),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "normalizers grow a 5-byte fragment past 1044"));
  assert_int_equal(brisk_alloc_live_bytes(), live);
  /* A large prompt fails just as fast and allocates nothing near 256x. */
  size_t big = 1 << 20;
  char *text = malloc(big);
  memset(text, 'a', big);
  assert_int_equal(brisk_vocab_tokenize(v, text, big, false, false, out, 1024, &n),
                   BRISK_E_UNSUPPORTED);
  free(text);
  brisk_vocab_free(v);
  /* Two doublings stay within 4x: tokenized as before. */
  v = growing_vocab(2, "aa", &st);
  assert_int_equal(st, BRISK_OK);
  assert_int_equal(brisk_vocab_tokenize(v, "aaaaaaaaaa", 10, false, false, out, 1024, &n),
                   BRISK_OK);
  assert_int_equal(n, 20);
  brisk_vocab_free(v);
  /* The audit's file: eight Replace("a" -> 16 a's) made 16^8 = 4.3e9 bytes
   * of one; now the third op is refused. */
  v = growing_vocab(8, "aaaaaaaaaaaaaaaa", &st);
  assert_int_equal(st, BRISK_OK);
  assert_int_equal(brisk_vocab_tokenize(v, "a", 1, false, false, out, 1024, &n),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "1-byte fragment past 1028"));
  brisk_vocab_free(v);
}

/* A token longer than 64 KiB is refused at load: no single token can
 * amplify a detokenized text (or an engine event) past that. */
static void test_token_length_limit(void **state) {
  (void)state;
  for (size_t len = 65536; len <= 65537; len++) {
    size_t cap = len + 256;
    char *json = malloc(cap);
    size_t k = (size_t)snprintf(json, cap, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"");
    memset(json + k, 'b', len);
    k += len;
    snprintf(json + k, cap - k, "\":1},\"merges\":[]}}");
    brisk_vocab *v = NULL;
    brisk_status st = brisk_vocab_from_hf_json(json, strlen(json), &v);
    if (len == 65536) {
      assert_int_equal(st, BRISK_OK);
      char piece[8];
      size_t n = 0;
      assert_int_equal(brisk_vocab_token_to_piece(v, 1, false, piece, sizeof piece, &n),
                       BRISK_E_BUFFER_TOO_SMALL);
      assert_int_equal(n, 65536);
      brisk_vocab_free(v);
    } else {
      assert_int_equal(st, BRISK_E_FORMAT);
      assert_non_null(strstr(brisk_last_error(), "token 1 is 65537 bytes long"));
      assert_null(v);
    }
    free(json);
  }
}

/* A Split regex that backtracks exponentially fails the call quickly
 * instead of hanging it; a short text still splits. */
static void test_regex_backtracking_limit(void **state) {
  (void)state;
  static const char json[] =
      "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a|a)+$\"},"
      "\"behavior\":\"Isolated\",\"invert\":false},\"model\":{\"type\":\"BPE\","
      "\"unk_token\":null,\"vocab\":{\"a\":0,\"b\":1,\"c\":2},\"merges\":[]}}";
  brisk_vocab *v = NULL;
  assert_int_equal(brisk_vocab_from_hf_json(json, strlen(json), &v), BRISK_OK);
  char text[64];
  memset(text, 'a', 40);
  text[40] = 'c'; /* 2^40 ways to fail to reach the end */
  int32_t out[64];
  size_t n = 0;
  assert_int_equal(brisk_vocab_tokenize(v, text, 41, false, false, out, 64, &n),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "backtracking steps"));
  assert_int_equal(brisk_vocab_tokenize(v, "aac", 3, false, false, out, 64, &n), BRISK_OK);
  assert_int_equal(n, 3);
  brisk_vocab_free(v);
}

static void expect_hf_error(const char *json, brisk_status want, const char *needle) {
  brisk_vocab *v = NULL;
  assert_int_equal(brisk_vocab_from_hf_json(json, strlen(json), &v), want);
  assert_null(v);
  if (needle && !strstr(brisk_last_error(), needle)) {
    fprintf(stderr, "message '%s' lacks '%s'\n", brisk_last_error(), needle);
    fail();
  }
}

static void test_hf_json_errors(void **state) {
  (void)state;
  expect_hf_error("{", BRISK_E_FORMAT, "tokenizer.json");
  expect_hf_error("{} x", BRISK_E_FORMAT, "trailing");
  expect_hf_error("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", BRISK_E_UNSUPPORTED,
                  "WordPiece");
  expect_hf_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                  "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}}",
                  BRISK_E_UNSUPPORTED, "BertPreTokenizer");
  expect_hf_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}",
                  BRISK_E_FORMAT, "-3");
  expect_hf_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999},\"merges\":[]}}",
                  BRISK_E_FORMAT, "99999999");
  expect_hf_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"ab\"]}}",
                  BRISK_E_FORMAT, "merge 0");
  expect_hf_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                  "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                  "\"behavior\":\"Isolated\"}}",
                  BRISK_E_FORMAT, "does not compile");
  expect_hf_error("", BRISK_E_FORMAT, "tokenizer.json");
}

/* ---- allocation failures ---- */

typedef struct oom_ctx {
  const tvocab *spm;
  brisk_vocab *v_spm, *v_json;
} oom_ctx;

static brisk_status op_build(void *p) {
  oom_ctx *c = p;
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  brisk_vocab_str *s = tv_strs(c->spm);
  d.type = BRISK_VOCAB_SPM;
  d.n_tokens = (uint32_t)c->spm->n;
  d.tokens = s;
  d.scores = c->spm->score;
  d.attrs = c->spm->attr;
  d.escape_spaces = d.add_space_prefix = d.byte_fallback = true;
  brisk_vocab *v = NULL;
  brisk_status st = brisk_vocab_build(&d, NULL, NULL, 0, &v);
  free(s);
  brisk_vocab_free(v);
  return st;
}

static brisk_status op_json(void *p) {
  (void)p;
  brisk_vocab *v = NULL;
  brisk_status st = brisk_vocab_from_hf_json(k_json_meta, strlen(k_json_meta), &v);
  brisk_vocab_free(v);
  return st;
}

static brisk_status op_tokenize(void *p) {
  oom_ctx *c = p;
  int32_t out[64];
  size_t n;
  const char text[] = "ab ab<|end|>c ba \xFF";
  /* The byte-level vocabulary has no token for 0xFF (and no unknown token):
   * its text stops before it. */
  brisk_status st = brisk_vocab_tokenize(c->v_json, text, sizeof text - 2, true, true, out, 64, &n);
  if (st == BRISK_OK)
    st = brisk_vocab_tokenize(c->v_spm, text, sizeof text - 1, true, true, out, 64, &n);
  return st;
}

static brisk_status op_detok(void *p) {
  oom_ctx *c = p;
  int32_t toks[] = {0xC3, 0xA9, 0xFF, 300};
  char buf[64];
  size_t n;
  brisk_status st = brisk_vocab_detokenize(c->v_spm, toks, 4,
                                           BRISK_DETOK_REPLACE_INVALID | BRISK_DETOK_CLEAN_SPACES,
                                           buf, sizeof buf, &n);
  if (st != BRISK_OK) return st;
  brisk_detok_stream *s = NULL;
  st = brisk_detok_stream_create(c->v_json, BRISK_DETOK_REPLACE_INVALID, &s);
  const char *t;
  for (int i = 0; i < 8 && st == BRISK_OK; i++) st = brisk_detok_stream_push(s, i % 6, &t, &n);
  if (st == BRISK_OK) st = brisk_detok_stream_flush(s, &t, &n);
  brisk_detok_stream_free(s);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_rng r = test_rng_seeded(__func__);
  tvocab t = {0};
  spm_vocab(&r, &t);
  oom_ctx c = {&t, build_spm(&t), hf_load(k_json_bl, "[\"a b\",\"\xC4\xA0 ab\"]")};
  test_every_allocation_fails(op_build, &c);
  test_every_allocation_fails(op_json, &c);
  test_every_allocation_fails(op_tokenize, &c);
  test_every_allocation_fails(op_detok, &c);
  brisk_vocab_free(c.v_spm);
  brisk_vocab_free(c.v_json);
  tv_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spm_matches_reference),
      cmocka_unit_test(test_bpe_matches_reference),
      cmocka_unit_test(test_special_tokens),
      cmocka_unit_test(test_arguments_and_capacity),
      cmocka_unit_test(test_stream_matches_detokenize),
      cmocka_unit_test(test_split_behaviors),
      cmocka_unit_test(test_named_pre_tokenizers),
      cmocka_unit_test(test_hf_json_bytelevel),
      cmocka_unit_test(test_hf_json_spm_like),
      cmocka_unit_test(test_hf_json_errors),
      cmocka_unit_test(test_uncovered_text_fails),
      cmocka_unit_test(test_normalizer_amplification),
      cmocka_unit_test(test_token_length_limit),
      cmocka_unit_test(test_regex_backtracking_limit),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
