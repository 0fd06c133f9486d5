/* GGUF pre-tokenizer names: what each name implies beyond its regexes, on
 * vocabularies written as GGUF files in memory. An unknown name falls back to
 * 'default'; raw UTF-8 SentencePiece-style BPE (gemma4) against a naive
 * reference on fresh random texts; add_sep; every known name on long input;
 * AFMoE's digit groups against llama.cpp's rule written out. The names and
 * regexes themselves are checked against llama.cpp's sources by
 * pretok_peer_check.py and against Hugging Face tokenizers by
 * pretok_hf_check.py. */
#include "tok_test_util.h"

#include "core/alloc.h"
#include "format/gguf.h"
#include "tokenizer/pretok.h"
#include "tokenizer/utf8.h"

#include <stdio.h>

static const char SP[] = "\xE2\x96\x81"; /* U+2581 */

/* Log capture: the warnings a load gives. */
static char g_log[4096];
static void log_sink(brisk_log_level level, const char *msg, void *ud) {
  (void)ud;
  if (level == BRISK_LOG_WARN && strlen(g_log) + strlen(msg) + 2 < sizeof g_log) {
    strcat(g_log, msg);
    strcat(g_log, "\n");
  }
}

typedef struct gguf_vocab {
  const char *model;         /* tokenizer.ggml.model */
  const char *pre;           /* NULL: no key */
  size_t pre_len;            /* 0: strlen(pre) */
  const char *const *tokens; /* [n] */
  const int32_t *types;      /* [n] or NULL */
  size_t n;
  const char *const *merges; /* [n_merges] */
  size_t n_merges;
  int32_t bos, sep;     /* -1: no key */
  int add_bos, add_sep; /* -1: no key */
} gguf_vocab;

/* Writes the vocabulary as GGUF in memory and loads it. */
static brisk_status load(const gguf_vocab *g, brisk_vocab **out) {
  brisk_gguf_writer *w = NULL;
  assert_int_equal(brisk_gguf_writer_create(3, 0, &w), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", g->model), BRISK_OK);
  if (g->pre)
    assert_int_equal(brisk_gguf_writer_set_strn(w, "tokenizer.ggml.pre", g->pre,
                                                g->pre_len ? g->pre_len : strlen(g->pre)),
                     BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", g->tokens, g->n),
                   BRISK_OK);
  if (g->types)
    assert_int_equal(
        brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, g->types, g->n),
        BRISK_OK);
  assert_int_equal(
      brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", g->merges, g->n_merges), BRISK_OK);
  if (g->bos >= 0)
    assert_int_equal(brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)g->bos),
                     BRISK_OK);
  if (g->sep >= 0)
    assert_int_equal(
        brisk_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", (uint32_t)g->sep),
        BRISK_OK);
  if (g->add_bos >= 0)
    assert_int_equal(brisk_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", g->add_bos),
                     BRISK_OK);
  if (g->add_sep >= 0)
    assert_int_equal(brisk_gguf_writer_set_bool(w, "tokenizer.ggml.add_sep_token", g->add_sep),
                     BRISK_OK);
  void *data = NULL;
  size_t size = 0;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &data, &size), BRISK_OK);
  brisk_gguf_writer_free(w);
  brisk_gguf *f = NULL;
  assert_int_equal(brisk_gguf_open_memory(data, size, &f), BRISK_OK);
  brisk_status st = brisk_vocab_from_gguf(f, out);
  brisk_gguf_close(f);
  brisk_free(data);
  return st;
}

/* ---- Unknown names ---- */

/* A byte-level vocabulary: the 256 byte code points, then merges. */
static char g_bl[256][4];
static const char *g_bl_tokens[256 + 4];
static const char *const g_bl_merges[] = {"h e", "l l", "he ll", "\xC4\xA0 w"};

static void bl_tokens(void) {
  for (int b = 0; b < 256; b++) {
    size_t k = brisk_utf8_encode(brisk_byte_to_cp((uint8_t)b), g_bl[b]);
    g_bl[b][k] = '\0';
    g_bl_tokens[b] = g_bl[b];
  }
  g_bl_tokens[256] = "he", g_bl_tokens[257] = "ll", g_bl_tokens[258] = "hell";
  g_bl_tokens[259] = "\xC4\xA0w";
}

static void expect_same_tokens(const brisk_vocab *a, const brisk_vocab *b, const char *text) {
  size_t na, nb;
  int32_t *ta = tok_all(a, text, strlen(text), false, false, &na);
  int32_t *tb = tok_all(b, text, strlen(text), false, false, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(ta, tb, na * sizeof *ta);
  free(ta);
  free(tb);
}

static void test_unknown_name_falls_back(void **state) {
  (void)state;
  bl_tokens();
  gguf_vocab g = {"gpt2", "default", 0, g_bl_tokens, NULL, 260, g_bl_merges, 4, -1, -1, -1, -1};
  brisk_vocab *ref = NULL;
  assert_int_equal(load(&g, &ref), BRISK_OK);
  const char *texts[] = {"hello world 1234567 !!?? x", "  $100 +2 <=> ^~| 'll 's", ""};
  char long_name[200];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  struct {
    const char *pre;
    size_t len;
    const char *warn; /* in the warning */
  } cases[] = {
      {"no-such-pre-tokenizer", 0, "unknown pre-tokenizer 'no-such-pre-tokenizer'"},
      {long_name, 0, "unknown pre-tokenizer 'xxxx"},
      {"with\0nul", 8, "unknown pre-tokenizer 'with?nul'"},
      {NULL, 0, "no tokenizer.ggml.pre"},
  };
  brisk_set_log_callback(log_sink, NULL, BRISK_LOG_WARN);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    g_log[0] = '\0';
    g.pre = cases[i].pre, g.pre_len = cases[i].len;
    brisk_vocab *v = NULL;
    brisk_status st = load(&g, &v);
    if (st != BRISK_OK) fprintf(stderr, "%s\n", brisk_last_error());
    assert_int_equal(st, BRISK_OK);
    assert_non_null(strstr(g_log, cases[i].warn));
    assert_non_null(strstr(g_log, "'default'"));
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
      expect_same_tokens(ref, v, texts[k]);
    brisk_vocab_free(v);
  }
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN);
  /* A known name gives no warning, and its own splits. */
  g_log[0] = '\0';
  brisk_set_log_callback(log_sink, NULL, BRISK_LOG_WARN);
  g.pre = "llama3", g.pre_len = 0;
  brisk_vocab *v = NULL;
  assert_int_equal(load(&g, &v), BRISK_OK);
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN);
  assert_string_equal(g_log, "");
  assert_string_equal(brisk_vocab_pre_name(v), "llama3");
  assert_true(brisk_vocab_adds_bos(v) == false); /* no BOS id in the file */
  brisk_vocab_free(v);
  brisk_vocab_free(ref);
  /* The pre-tokenizer itself still refuses an unknown name by name. */
  brisk_pretok *p = NULL;
  assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
  assert_int_equal(brisk_pretok_add_named(p, "no-such-pre", NULL), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "no-such-pre"));
  assert_null(brisk_pretok_lookup("no-such-pre", NULL));
  brisk_pretok_free(p);
}

/* ---- SentencePiece-style raw UTF-8 BPE (gemma4) ---- */

typedef struct raw_vocab {
  tvocab t;
  char **ml, **mr; /* merge halves */
  size_t n_merges;
  int32_t bos;
} raw_vocab;

/* Units U+2581 a b c \n and 日 (é has no token: byte fallback); byte tokens
 * typed NORMAL, as some converters write them; "\n\n" and "\n\n\n" are
 * tokens no merge makes (Gemma 4's newline runs). */
static void raw_vocab_make(test_rng *r, raw_vocab *v) {
  memset(v, 0, sizeof *v);
  char buf[64];
  v->bos = tv_add(&v->t, "<bos>", 5, BRISK_TOKEN_ATTR_CONTROL, 0);
  for (int b = 0; b < 256; b++) {
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    tv_add(&v->t, buf, strlen(buf), BRISK_TOKEN_ATTR_NORMAL, 0);
  }
  const char *units[] = {SP, "a", "b", "c", "\n", "\xE6\x97\xA5"};
  size_t n_units = sizeof units / sizeof units[0];
  for (size_t i = 0; i < n_units; i++)
    tv_add(&v->t, units[i], strlen(units[i]), BRISK_TOKEN_ATTR_NORMAL, 0);
  tv_add(&v->t, "\n\n", 2, BRISK_TOKEN_ATTR_NORMAL, 0);
  tv_add(&v->t, "\n\n\n", 3, BRISK_TOKEN_ATTR_NORMAL, 0);
  size_t first = v->t.n - n_units - 2;
  v->ml = calloc(200, sizeof *v->ml);
  v->mr = calloc(200, sizeof *v->mr);
  for (int k = 0; k < 400 && v->n_merges < 200; k++) {
    /* Two existing pieces (no newline runs: those stay unmerged). */
    size_t a = first + test_rng_u64(r) % (v->t.n - first);
    size_t b = first + test_rng_u64(r) % (v->t.n - first);
    const char *ta = v->t.text[a], *tb = v->t.text[b];
    if (strchr(ta, '\n') || strchr(tb, '\n') || strlen(ta) + strlen(tb) > 24) continue;
    snprintf(buf, sizeof buf, "%s%s", ta, tb);
    if (tv_find(&v->t, buf, strlen(buf)) >= 0) continue;
    v->ml[v->n_merges] = strdup(ta), v->mr[v->n_merges] = strdup(tb);
    v->n_merges++;
    tv_add(&v->t, buf, strlen(buf), BRISK_TOKEN_ATTR_NORMAL, 0);
  }
}

static void raw_vocab_free(raw_vocab *v) {
  for (size_t i = 0; i < v->n_merges; i++) free(v->ml[i]), free(v->mr[i]);
  free(v->ml), free(v->mr);
  tv_free(&v->t);
}

static brisk_vocab *raw_vocab_load(const raw_vocab *v, const char *model, const char *pre) {
  const char **toks = malloc(v->t.n * sizeof *toks);
  int32_t *types = malloc(v->t.n * sizeof *types);
  for (size_t i = 0; i < v->t.n; i++) {
    toks[i] = v->t.text[i];
    types[i] = v->t.attr[i] == BRISK_TOKEN_ATTR_CONTROL ? 3 : 1;
  }
  char **merges = malloc((v->n_merges + 1) * sizeof *merges);
  for (size_t i = 0; i < v->n_merges; i++) {
    merges[i] = malloc(strlen(v->ml[i]) + strlen(v->mr[i]) + 2);
    sprintf(merges[i], "%s %s", v->ml[i], v->mr[i]);
  }
  gguf_vocab g = {model,       pre,    0,  toks, types, v->t.n, (const char *const *)merges,
                  v->n_merges, v->bos, -1, 0,    -1};
  brisk_vocab *out = NULL;
  brisk_status st = load(&g, &out);
  if (st != BRISK_OK) fprintf(stderr, "%s\n", brisk_last_error());
  assert_int_equal(st, BRISK_OK);
  for (size_t i = 0; i < v->n_merges; i++) free(merges[i]);
  free(merges);
  free(toks);
  free(types);
  return out;
}

/* The naive reference, as llama.cpp describes Gemma 4: ' ' -> U+2581, lines
 * and runs of '\n' as words, a run of '\n' that is a token is that token,
 * else merges by rank (lowest first, leftmost on ties), then <0xXX> for
 * what no token covers. */
static size_t ref_word(const raw_vocab *v, const char *w, size_t n, int32_t *out) {
  size_t k = 0;
  bool nl = true;
  for (size_t i = 0; i < n; i++) nl = nl && w[i] == '\n';
  int32_t whole = tv_find(&v->t, w, n);
  if (nl && whole >= 0) {
    out[0] = whole;
    return 1;
  }
  char *sym[512];
  size_t len[512], ns = 0;
  for (size_t i = 0; i < n;) {
    size_t u = brisk_utf8_unit((const unsigned char *)w + i, n - i);
    sym[ns] = (char *)w + i, len[ns++] = u;
    i += u;
  }
  for (;;) {
    size_t best = SIZE_MAX, at = 0;
    for (size_t i = 0; i + 1 < ns; i++)
      for (size_t m = 0; m < v->n_merges && m < best; m++)
        if (strlen(v->ml[m]) == len[i] && strlen(v->mr[m]) == len[i + 1] &&
            memcmp(v->ml[m], sym[i], len[i]) == 0 && memcmp(v->mr[m], sym[i + 1], len[i + 1]) == 0)
          best = m, at = i;
    if (best == SIZE_MAX) break;
    len[at] += len[at + 1];
    memmove(sym + at + 1, sym + at + 2, (ns - at - 2) * sizeof *sym);
    memmove(len + at + 1, len + at + 2, (ns - at - 2) * sizeof *len);
    ns--;
  }
  for (size_t i = 0; i < ns; i++) {
    int32_t id = tv_find(&v->t, sym[i], len[i]);
    if (id >= 0) {
      out[k++] = id;
      continue;
    }
    for (size_t j = 0; j < len[i]; j++) {
      char hex[8];
      snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)sym[i][j]);
      out[k++] = tv_find(&v->t, hex, 6);
    }
  }
  return k;
}

static size_t ref_tokenize(const raw_vocab *v, const char *text, int32_t *out) {
  char esc[4096];
  size_t n = 0, k = 0;
  for (const char *p = text; *p; p++) {
    if (*p == ' ')
      memcpy(esc + n, SP, 3), n += 3;
    else
      esc[n++] = *p;
  }
  out[k++] = v->bos; /* forced: the file says add_bos_token = false */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    bool nl = esc[i] == '\n';
    while (j < n && (esc[j] == '\n') == nl) j++;
    k += ref_word(v, esc + i, j - i, out + k);
    i = j;
  }
  return k;
}

static void test_gemma4_raw_bpe(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("test_gemma4_raw_bpe");
  const char *alpha[] = {" ", "a", "b", "c", "\n", "\xC3\xA9", "\xE6\x97\xA5", "ab", "  "};
  for (int round = 0; round < 3; round++) {
    raw_vocab rv;
    raw_vocab_make(&r, &rv);
    /* Both ways llama.cpp reaches the gemma4 pre-tokenizer. */
    brisk_vocab *by_model = raw_vocab_load(&rv, "gemma4", NULL);
    brisk_vocab *by_pre = raw_vocab_load(&rv, "gpt2", "gemma4");
    assert_true(brisk_vocab_adds_bos(by_model) && brisk_vocab_adds_bos(by_pre));
    for (int k = 0; k < 150; k++) {
      char text[1024];
      size_t len = 0, units = test_rng_u64(&r) % 60;
      for (size_t i = 0; i < units; i++) {
        const char *u = alpha[test_rng_u64(&r) % (sizeof alpha / sizeof alpha[0])];
        memcpy(text + len, u, strlen(u));
        len += strlen(u);
      }
      text[len] = '\0';
      int32_t want[2048];
      size_t nw = ref_tokenize(&rv, text, want);
      for (int which = 0; which < 2; which++) {
        const brisk_vocab *v = which ? by_pre : by_model;
        size_t n;
        int32_t *got = tok_all(v, text, len, true, false, &n);
        if (n != nw || memcmp(got, want, n * sizeof *got) != 0) {
          fprintf(stderr, "text '%s': %zu tokens, reference %zu\n", text, n, nw);
          fail();
        }
        size_t bl;
        char *back = detok_all(v, got, n, 0, &bl);
        assert_int_equal(bl, len);
        assert_memory_equal(back, text, len);
        free(back);
        free(got);
      }
    }
    brisk_vocab_free(by_model);
    brisk_vocab_free(by_pre);
    raw_vocab_free(&rv);
  }
}

/* 'whitespace': raw UTF-8 words between whitespace, no U+2581. */
static void test_whitespace_raw(void **state) {
  (void)state;
  const char *toks[] = {"a", "b", "ab", " ", "\xC4\xA0", "\xE6\x97\xA5"};
  const char *merges[] = {"a b"};
  gguf_vocab g = {"gpt2", "whitespace", 0, toks, NULL, 6, merges, 1, -1, -1, -1, -1};
  brisk_vocab *v = NULL;
  assert_int_equal(load(&g, &v), BRISK_OK);
  size_t n;
  int32_t *t = tok_all(v, "ab a \xE6\x97\xA5", 8, false, false, &n);
  int32_t want[] = {2, 3, 0, 3, 5};
  assert_int_equal(n, 5);
  assert_memory_equal(t, want, sizeof want);
  free(t);
  brisk_vocab_free(v);
}

/* ---- add_sep ---- */

static void test_add_sep(void **state) {
  (void)state;
  bl_tokens();
  struct {
    const char *pre;
    int32_t sep;
    int add_sep;
    bool want;
  } cases[] = {
      {"roberta-bpe", 258, -1, true}, {"jina-v1-en", 258, -1, true}, {"roberta-bpe", 258, 0, false},
      {"roberta-bpe", -1, -1, false}, {"gpt-2", 258, -1, false},     {"gpt-2", 258, 1, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gguf_vocab g = {"gpt2", cases[i].pre, 0,  g_bl_tokens,     NULL, 260, g_bl_merges, 4,
                    -1,     cases[i].sep, -1, cases[i].add_sep};
    brisk_vocab *v = NULL;
    assert_int_equal(load(&g, &v), BRISK_OK);
    assert_int_equal(brisk_vocab_adds_sep(v), cases[i].want);
    /* Tokenizing never adds it (llama.cpp adds SEP for rerank pairs only). */
    size_t n;
    int32_t *t = tok_all(v, "hell", 4, true, false, &n);
    assert_int_equal(n, 1);
    assert_int_equal(t[0], 258);
    free(t);
    brisk_vocab_free(v);
  }
}

/* Every name loads, with the defaults its flags give (BOS and SEP ids in the
 * file, no add_*_token keys). */
static void test_every_name_loads(void **state) {
  (void)state;
  bl_tokens();
  brisk_set_log_callback(log_sink, NULL, BRISK_LOG_WARN);
  for (size_t i = 0; i < brisk_pretok_n_names(); i++) {
    const char *name = brisk_pretok_name_at(i);
    brisk_pretok_info info;
    assert_non_null(brisk_pretok_lookup(name, &info));
    gguf_vocab g = {"gpt2", name, 0, g_bl_tokens, NULL, 260, g_bl_merges, 4, 257, 258, -1, -1};
    brisk_vocab *v = NULL;
    g_log[0] = '\0';
    brisk_status st = load(&g, &v);
    if (st != BRISK_OK) fprintf(stderr, "%s: %s\n", name, brisk_last_error());
    assert_int_equal(st, BRISK_OK);
    assert_string_equal(brisk_vocab_pre_name(v), name);
    assert_int_equal(brisk_vocab_adds_bos(v), info.add_bos || info.force_bos);
    assert_int_equal(brisk_vocab_adds_sep(v), info.add_sep);
    assert_null(strstr(g_log, "unknown pre-tokenizer"));
    brisk_vocab_free(v);
  }
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN);
}

/* ---- Every name on long, varied input ---- */

typedef struct cat_ctx {
  char *buf;
  size_t n;
} cat_ctx;

static brisk_status cat_piece(void *ctx, const char *s, size_t n) {
  cat_ctx *c = ctx;
  memcpy(c->buf + c->n, s, n);
  c->n += n;
  return BRISK_OK;
}

static void test_every_name_on_long_input(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("test_every_name_on_long_input");
  const char *words[] = {
      "word",         "\xC3\x89t\xC3\xA9", "na\xC3\xAFve", "x",   "\xE6\x97\xA5\xE6\x9C\xAC",
      "\xED\x95\x9C", "123456789",         "  ",           "\n",  "\t",
      "...",          "\xF0\x9F\x98\x81",  "'s",           "ABC", "\xFF\xFE"};
  size_t cap = 400000, n = 0;
  char *text = malloc(cap), *back = malloc(cap);
  while (n < 150000) {
    const char *w = words[test_rng_u64(&r) % (sizeof words / sizeof words[0])];
    memcpy(text + n, w, strlen(w)), n += strlen(w);
    text[n++] = ' ';
  }
  /* Long runs of one class: spaces, letters, digits, newlines, Han. */
  const char *runs[] = {" ", "a", "1", "\n", "\xE6\x97\xA5"};
  for (size_t k = 0; k < 5; k++)
    for (int i = 0; i < 8000; i++) memcpy(text + n, runs[k], strlen(runs[k])), n += strlen(runs[k]);
  for (size_t i = 0; i < brisk_pretok_n_names(); i++) {
    const char *name = brisk_pretok_name_at(i);
    brisk_pretok *p = NULL;
    brisk_pretok_ws *ws = NULL;
    assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
    assert_int_equal(brisk_pretok_add_named(p, name, NULL), BRISK_OK);
    assert_int_equal(brisk_pretok_ws_create(p, &ws), BRISK_OK);
    cat_ctx c = {back, 0};
    brisk_status st = brisk_pretok_run(p, ws, text, n, cat_piece, &c);
    if (st != BRISK_OK) {
      fprintf(stderr, "%s: %s\n", name, brisk_last_error());
      fail();
    }
    /* The pieces are the text, in order, nothing lost or added. */
    assert_int_equal(c.n, n);
    assert_memory_equal(back, text, n);
    brisk_pretok_ws_free(ws);
    brisk_pretok_free(p);
  }
  free(text);
  free(back);
}

/* ---- AFMoE digits ---- */

static brisk_status collect_piece(void *ctx, const char *s, size_t n) {
  cat_ctx *c = ctx;
  memcpy(c->buf + c->n, s, n);
  c->n += n;
  c->buf[c->n++] = '|';
  return BRISK_OK;
}

/* llama.cpp's AFMoE rule: a run of digits is cut into (length mod 3) digits,
 * if any, then threes; other text stays whole between runs (ASCII here). */
static void afmoe_ref(const char *s, size_t n, char *out, size_t *on) {
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    bool dig = s[i] >= '0' && s[i] <= '9';
    while (j < n && (s[j] >= '0' && s[j] <= '9') == dig) j++;
    if (!dig) {
      memcpy(out + k, s + i, j - i), k += j - i;
      out[k++] = '|';
    } else {
      size_t len = j - i, first = len % 3 ? len % 3 : 3;
      for (size_t a = i; a < j; a += (a == i ? first : 3)) {
        size_t g = a == i ? first : 3;
        memcpy(out + k, s + a, g), k += g;
        out[k++] = '|';
      }
    }
    i = j;
  }
  *on = k;
}

static void test_afmoe_digit_groups(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("test_afmoe_digit_groups");
  const char *pat = brisk_pretok_lookup("afmoe", NULL)[0];
  brisk_pretok *p = NULL;
  brisk_pretok_ws *ws = NULL;
  assert_int_equal(brisk_pretok_create(&p), BRISK_OK);
  assert_int_equal(brisk_pretok_add(p, pat, false, BRISK_SPLIT_ISOLATED, false), BRISK_OK);
  assert_int_equal(brisk_pretok_ws_create(p, &ws), BRISK_OK);
  for (int k = 0; k < 300; k++) {
    char text[256], got[1024], want[1024];
    size_t n = 1 + test_rng_u64(&r) % 120, wn;
    for (size_t i = 0; i < n; i++) {
      uint64_t x = test_rng_u64(&r) % 10;
      text[i] = x < 7 ? (char)('0' + x) : x == 7 ? 'a' : x == 8 ? ' ' : '.';
    }
    cat_ctx c = {got, 0};
    assert_int_equal(brisk_pretok_run(p, ws, text, n, collect_piece, &c), BRISK_OK);
    afmoe_ref(text, n, want, &wn);
    if (c.n != wn || memcmp(got, want, wn) != 0) {
      fprintf(stderr, "'%.*s': got '%.*s', want '%.*s'\n", (int)n, text, (int)c.n, got, (int)wn,
              want);
      fail();
    }
  }
  brisk_pretok_ws_free(ws);
  brisk_pretok_free(p);
}

/* ---- Out of memory ---- */

typedef struct oom_ctx {
  void *data; /* a serialized GGUF vocabulary */
  size_t size;
  const char *text; /* tokenized after loading */
} oom_ctx;

static brisk_status op_load_tokenize(void *p) {
  oom_ctx *c = p;
  brisk_gguf *f = NULL;
  brisk_vocab *v = NULL;
  brisk_status st = brisk_gguf_open_memory(c->data, c->size, &f);
  if (st == BRISK_OK) st = brisk_vocab_from_gguf(f, &v);
  brisk_gguf_close(f);
  int32_t out[64];
  size_t n;
  if (st == BRISK_OK)
    st = brisk_vocab_tokenize(v, c->text, strlen(c->text), true, false, out, 64, &n);
  brisk_vocab_free(v);
  return st;
}

/* Loading a Gemma 4 vocabulary (the escape op, the byte tokens, the
 * newline-run rule) and an unknown name's fallback, failing each allocation
 * in turn: BRISK_E_OUT_OF_MEMORY and nothing leaked. */
static void test_allocation_failures(void **state) {
  (void)state;
  static char bytes[256][8];
  const char *toks[256 + 8];
  size_t n = 0;
  toks[n++] = "<bos>";
  for (int b = 0; b < 256; b++) {
    snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
    toks[n++] = bytes[b];
  }
  const char *more[] = {SP,
                        "a",
                        "b",
                        "\n",
                        "\n\n",
                        "\xE2\x96\x81"
                        "a",
                        "a\xE2\x96\x81"
                        "a"};
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) toks[n++] = more[i];
  const char *merges[] = {"\xE2\x96\x81 a"};
  const char *names[] = {"gemma4", "no-such-pre"};
  /* The fallback is byte-level: this vocabulary covers only a and b there. */
  const char *texts[] = {"a ab\n\n\xC3\xA9 b", "aab"};
  for (int k = 0; k < 2; k++) {
    brisk_gguf_writer *w = NULL;
    assert_int_equal(brisk_gguf_writer_create(3, 0, &w), BRISK_OK);
    assert_int_equal(brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"), BRISK_OK);
    assert_int_equal(brisk_gguf_writer_set_str(w, "tokenizer.ggml.pre", names[k]), BRISK_OK);
    assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, n), BRISK_OK);
    assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1),
                     BRISK_OK);
    assert_int_equal(brisk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0), BRISK_OK);
    oom_ctx c = {NULL, 0, texts[k]};
    assert_int_equal(brisk_gguf_writer_write_memory(w, &c.data, &c.size), BRISK_OK);
    brisk_gguf_writer_free(w);
    brisk_set_log_callback(log_sink, NULL, BRISK_LOG_WARN);
    assert_true(test_every_allocation_fails(op_load_tokenize, &c) > 10);
    brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN);
    brisk_free(c.data);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_name_falls_back),
      cmocka_unit_test(test_gemma4_raw_bpe),
      cmocka_unit_test(test_whitespace_raw),
      cmocka_unit_test(test_add_sep),
      cmocka_unit_test(test_every_name_loads),
      cmocka_unit_test(test_every_name_on_long_input),
      cmocka_unit_test(test_afmoe_digit_groups),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
