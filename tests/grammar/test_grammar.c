/* The constraint core: llama.cpp's grammar files compile and accept strings
 * derived from their rules; malformed grammars, schemas and patterns are
 * errors naming the position; token masks are exactly the tokens whose
 * bytes the matcher takes (checked token by token on fresh random states),
 * never miss the next piece of a string of the language, and admit
 * end-of-generation only on a whole string; a real vocabulary (SPM, 32k)
 * steps through constrained text; allocation failures are clean. */
#include "gen.h"
#include "grammar/grammar.h"
#include "test_support.h"

#include "core/alloc.h"
#include "sample/sampler.h"

#include <math.h>

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's grammars/ folder in the peer's cache (../shared/peer/setup.sh). */
static const char *peer_grammars(void) {
  static char buf[1024];
  const char *cache = getenv("BRISK_PEER_CACHE");
  if (!cache) cache = "/tmp/brisk-peer";
  const char *rel[] = {"llama.cpp/grammars", "pypi/src/vendor/llama.cpp/grammars"};
  for (int i = 0; i < 2; i++) {
    snprintf(buf, sizeof buf, "%s/%s", cache, rel[i]);
    DIR *d = opendir(buf);
    if (d) {
      closedir(d);
      return buf;
    }
  }
  return NULL;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static brisk_grammar *compile(brisk_constraint_kind kind, const char *text) {
  brisk_constraint_params p;
  brisk_constraint_params_init(&p);
  p.kind = kind;
  p.text = text;
  brisk_grammar *g = NULL;
  brisk_status st = brisk_grammar_compile(&p, &g);
  if (st) fprintf(stderr, "compile failed: %s\n", brisk_last_error());
  assert_int_equal(st, BRISK_OK);
  return g;
}

/* A masker over a vocabulary without tokens, to feed text directly. */
static void text_masker(gr_masker *k, const brisk_grammar *g) {
  gr_vocab v;
  const char *none = "";
  uint32_t zero = 0;
  assert_int_equal(gr_vocab_build_texts(1, &none, &zero, NULL, 0, &v), BRISK_OK);
  assert_int_equal(gr_masker_init_vocab(k, g, &v), BRISK_OK);
}

/* n strings derived from g are accepted whole, and every proper prefix is
 * a live state. */
static void accepts_derived(const brisk_grammar *g, int n, uint64_t seed, const char *name) {
  gen_ctx G;
  assert_int_equal(gen_init(&G, g, seed), 0);
  gr_masker k;
  text_masker(&k, g);
  gr_state s;
  assert_int_equal(gr_state_init(&k, &s), BRISK_OK);
  for (int i = 0; i < n; i++) {
    size_t len;
    const char *str = gen_string(&G, 64 + (size_t)(gen_rand(&G) % 200), &len);
    assert_non_null(str);
    gr_state_reset(&k, &s);
    int r = gr_state_feed(&k, &s, str, len);
    if (r != 1 || !gr_state_accepting(&s))
      fail_msg("%s: derived string %d not accepted (r %d): '%s'", name, i, r, str);
  }
  gr_state_release(&s);
  gr_masker_release(&k);
  gen_release(&G);
}

static void test_llama_grammars(void **state) {
  (void)state;
  const char *dir = peer_grammars();
  if (!dir) SKIP_BECAUSE("llama.cpp's grammars/ is absent (run ../shared/peer/setup.sh)");
  DIR *d = opendir(dir);
  assert_non_null(d);
  test_rng rng = test_rng_seeded(__func__);
  int n_files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name);
    if (l < 6 || strcmp(e->d_name + l - 5, ".gbnf")) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    char *text = slurp(path);
    assert_non_null(text);
    brisk_grammar *g = compile(BRISK_CONSTRAINT_GBNF, text);
    accepts_derived(g, 40, test_rng_u64(&rng), e->d_name);
    brisk_grammar_free(g);
    free(text);
    n_files++;
  }
  closedir(d);
  assert_true(n_files >= 5);
}

/* Strings a few grammars must take or refuse (hand-checked). */
static void test_accept_reject(void **state) {
  (void)state;
  static const struct {
    const char *gbnf, *text;
    int whole, prefix; /* accepted as a whole string; as a prefix */
  } cases[] = {
      {"root ::= \"ab\" [0-9]+", "ab12", 1, 1},
      {"root ::= \"ab\" [0-9]+", "ab", 0, 1},
      {"root ::= \"ab\" [0-9]+", "abx", 0, 0},
      {"root ::= [^a-c]{2,3}", "dd", 1, 1},
      {"root ::= [^a-c]{2,3}", "ddd", 1, 1},
      {"root ::= [^a-c]{2,3}", "dddd", 0, 0},
      {"root ::= [^a-c]{2,3}", "da", 0, 0},
      {"root ::= x | y\nx ::= \"é\" .\ny ::= \"\\u00e9\\U0001F600\"", "é😀", 1, 1},
      {"root ::= x | y\nx ::= \"é\" .\ny ::= \"\\u00e9\\U0001F600\"", "éa", 1, 1},
      {"root ::= ( \"a\" | \"b\" )* \"c\"", "ababc", 1, 1},
      {"root ::= ( \"a\" | \"b\" )* \"c\"", "abca", 0, 0},
      {"root ::= \"(\" root \")\" | \"\"", "((()))", 1, 1},
      {"root ::= \"(\" root \")\" | \"\"", "(()", 0, 1},
      {"root ::= \"(\" root \")\" | \"\"", "())", 0, 0},
      {"root ::= [a]{0,2} \"b\"?", "", 1, 1},
      {"root ::= [a]{0,2} \"b\"?", "aab", 1, 1},
      {"root ::= [a]{0,2} \"b\"?", "aaa", 0, 0},
      {"root ::= [a]{2,} # comment\n", "aaaaa", 1, 1},
      {"root ::= [a]{2,}", "a", 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    brisk_grammar *g = compile(BRISK_CONSTRAINT_GBNF, cases[i].gbnf);
    gr_masker k;
    text_masker(&k, g);
    gr_state s;
    assert_int_equal(gr_state_init(&k, &s), BRISK_OK);
    int r = gr_state_feed(&k, &s, cases[i].text, strlen(cases[i].text));
    if ((r == 1) != cases[i].prefix || (r == 1 && gr_state_accepting(&s)) != cases[i].whole)
      fail_msg("case %zu: '%s' on %s: feed %d accepting %d", i, cases[i].text, cases[i].gbnf, r,
               gr_state_accepting(&s));
    gr_state_release(&s);
    gr_masker_release(&k);
    brisk_grammar_free(g);
  }
}

static void expect_error(brisk_constraint_kind kind, const char *text, const char *needle) {
  brisk_constraint_params p;
  brisk_constraint_params_init(&p);
  p.kind = kind;
  p.text = text;
  brisk_grammar *g = NULL;
  brisk_status st = brisk_grammar_compile(&p, &g);
  if (st != BRISK_E_INVALID_ARGUMENT || !strstr(brisk_last_error(), needle))
    fail_msg("'%s': status %d, message '%s', expected '%s'", text, st, brisk_last_error(), needle);
  assert_null(g);
}

static void test_errors(void **state) {
  (void)state;
  const brisk_constraint_kind G = BRISK_CONSTRAINT_GBNF;
  expect_error(G, "", "no rules");
  expect_error(G, "root ::= \"a", "line 1 column 10: a literal does not end");
  expect_error(G, "root ::= x\n", "line 1 column 10: rule 'x' is used but never defined");
  expect_error(G, "root ::= \"a\"\nroot ::= \"b\"",
               "line 2 column 1: rule 'root' is defined twice");
  expect_error(G, "root ::= [b-a]", "line 1 column 13: range end");
  expect_error(G, "root ::= *", "line 1 column 10: '*' has nothing before it");
  expect_error(G, "root ::= ( \"a\"", "missing ')'");
  expect_error(G, "root ::= \"a\" )", "line 1 column 14: unexpected ')'");
  expect_error(G, "root ::= \"\\q\"", "unknown escape");
  expect_error(G, "root ::= \"\\x4\"", "needs 2 hex digits");
  expect_error(G, "root ::= [a]{3,2}", "max < min");
  expect_error(G, "root ::= [a]{99999}", "above");
  expect_error(G, "root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive");
  expect_error(G, "root ::= x \"a\"\nx ::= y\ny ::= \"\" | root", "left-recursive");
  expect_error(G, "root ::= \"a\" root", "rule 'root' can never finish");
  expect_error(G, "root ::= [^\\x00-\\U0010FFFF]", "matches nothing");
  expect_error(G, "x ::= \"a\"", "no rule named 'root'");
  expect_error(G, "root ::= \"\xff\"", "invalid UTF-8");
  expect_error(G, "root\n::= \"a\"", "line 1 column 5: expected '::='");
  const brisk_constraint_kind S = BRISK_CONSTRAINT_JSON_SCHEMA;
  expect_error(S, "{\"type\": \"object\",\n \"properties\": {\"a\": }}", "line 2");
  expect_error(S, "{\"type\": \"strin\"}", "at /: unknown type 'strin'");
  expect_error(S, "{\"properties\": {\"a\": {\"type\": \"string\", \"minLength\": -1}}}",
               "at /properties/a: 'minLength' must be a non-negative integer");
  expect_error(S, "{\"properties\": {\"a\": {\"not\": {}}}}",
               "at /properties/a: keyword 'not' is not supported");
  expect_error(S, "{\"$ref\": \"#/$defs/missing\"}", "points at nothing");
  expect_error(S, "{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no number");
  expect_error(S, "{\"type\": \"string\", \"pattern\": \"a(b\"}",
               "json_schema: at /pattern: position 1: missing ')'");
  expect_error(S, "{\"type\": \"string\", \"format\": \"hostname\"}", "format 'hostname'");
  expect_error(S, "false", "allows no value");
  const brisk_constraint_kind R = BRISK_CONSTRAINT_REGEX;
  expect_error(R, "ab(c", "regex: position 2: missing ')'");
  expect_error(R, "a)", "position 1: unbalanced ')'");
  expect_error(R, "*a", "position 0: nothing to repeat");
  expect_error(R, "a**", "position 2: multiple repeat");
  expect_error(R, "(a)\\1", "position 3: unsupported escape");
  expect_error(R, "(?=a)", "unsupported group");
  expect_error(R, "[z-a]", "bad character range");
  expect_error(R, "a^b", "'^' is only supported at the start");
  brisk_constraint_params p;
  brisk_constraint_params_init(&p);
  brisk_grammar *g = NULL;
  assert_int_equal(brisk_grammar_compile(&p, &g), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_grammar_compile(NULL, &g), BRISK_E_INVALID_ARGUMENT);
  p.kind = G;
  assert_int_equal(brisk_grammar_compile(&p, &g), BRISK_E_INVALID_ARGUMENT); /* text NULL */
  assert_null(g);
}

/* A vocabulary for the property test: pieces of strings of the grammar
 * (so many tokens are allowed somewhere), random ASCII, and single bytes,
 * including the halves of multi-byte characters. */
typedef struct tvocab {
  char **text;
  uint32_t *len;
  int32_t n;
} tvocab;

static void make_vocab(tvocab *tv, gen_ctx *G, test_rng *rng, int32_t n) {
  tv->text = calloc((size_t)n, sizeof *tv->text);
  tv->len = calloc((size_t)n, sizeof *tv->len);
  tv->n = n;
  for (int32_t t = 0; t < n; t++) {
    char buf[16];
    uint32_t l = 0;
    uint64_t kind = test_rng_u64(rng) % 4;
    if (t < 256) { /* every byte */
      buf[0] = (char)t;
      l = 1;
    } else if (kind < 3) {
      size_t len;
      const char *s = gen_string(G, 40, &len);
      if (len > 0) {
        size_t a = test_rng_u64(rng) % len, m = 1 + test_rng_u64(rng) % 8;
        if (a + m > len) m = len - a;
        memcpy(buf, s + a, m);
        l = (uint32_t)m;
      }
    } else {
      l = 1 + (uint32_t)(test_rng_u64(rng) % 6);
      for (uint32_t i = 0; i < l; i++) buf[i] = (char)(32 + test_rng_u64(rng) % 95);
    }
    tv->text[t] = malloc(l + 1);
    memcpy(tv->text[t], buf, l);
    tv->len[t] = l;
  }
}

static void free_vocab(tvocab *tv) {
  for (int32_t t = 0; t < tv->n; t++) free(tv->text[t]);
  free(tv->text);
  free(tv->len);
}

static uint64_t n_cut_total; /* masks settled through cut stacks, over the property test */

static int bit(const uint32_t *mask, int32_t t) { return (int)(mask[t / 32] >> (t % 32) & 1); }

static void mask_property(const brisk_grammar *g, test_rng *rng, const char *name) {
  gen_ctx G;
  assert_int_equal(gen_init(&G, g, test_rng_u64(rng)), 0);
  tvocab tv;
  int32_t n_vocab = 1500, eog = n_vocab - 1;
  make_vocab(&tv, &G, rng, n_vocab);
  gr_vocab v;
  assert_int_equal(gr_vocab_build_texts(n_vocab, (const char *const *)tv.text, tv.len, &eog, 1, &v),
                   BRISK_OK);
  gr_masker k;
  assert_int_equal(gr_masker_init_vocab(&k, g, &v), BRISK_OK);
  /* Half the runs with every position's entry made up front, as
   * brisk_constraint_create does; the others make them on demand. */
  if (test_rng_u64(rng) & 1) assert_int_equal(gr_masker_precompute(&k), BRISK_OK);
  gr_state s, probe;
  assert_int_equal(gr_state_init(&k, &s), BRISK_OK);
  assert_int_equal(gr_state_init(&k, &probe), BRISK_OK);
  for (int round = 0; round < 12; round++) {
    size_t len;
    const char *str = gen_string(&G, 80, &len);
    char *copy = malloc(len + 1);
    memcpy(copy, str, len + 1);
    /* States along the string, cut at random bytes (also inside characters). */
    size_t cut = 0;
    gr_state_reset(&k, &s);
    while (1) {
      const uint32_t *mask;
      int32_t n_allowed, count = 0;
      assert_int_equal(gr_mask(&k, &s, &mask, &n_allowed), BRISK_OK);
      for (int32_t t = 0; t < n_vocab; t++) {
        int want;
        if (t == eog) {
          want = gr_state_accepting(&s);
        } else {
          assert_int_equal(gr_state_copy(&probe, &s), BRISK_OK);
          want = gr_state_feed(&k, &probe, tv.text[t], tv.len[t]) == 1 && tv.len[t] > 0;
        }
        if (bit(mask, t) != want)
          fail_msg("%s: token %d ('%.*s') mask %d, matcher %d, after '%.*s'", name, t,
                   (int)tv.len[t], tv.text[t], bit(mask, t), want, (int)cut, copy);
        count += want;
        /* The next piece of the string itself is always allowed. */
        if (t != eog && tv.len[t] <= len - cut && !memcmp(tv.text[t], copy + cut, tv.len[t]) &&
            !bit(mask, t))
          fail_msg("%s: token '%.*s' continues the string but is masked", name, (int)tv.len[t],
                   tv.text[t]);
      }
      assert_int_equal(count, n_allowed);
      if (cut == len) {
        assert_true(bit(mask, eog));
        break;
      }
      size_t step = 1 + test_rng_u64(rng) % 5;
      if (step > len - cut) step = len - cut;
      assert_int_equal(gr_state_feed(&k, &s, copy + cut, step), 1);
      cut += step;
    }
    free(copy);
  }
  assert_true(k.n_hits + k.n_misses > 0);
  assert_true(k.n_entries_made > 0);
  n_cut_total += k.n_cut;
  gr_state_release(&s);
  gr_state_release(&probe);
  gr_masker_release(&k);
  free_vocab(&tv);
  gen_release(&G);
}

static void test_mask_property(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded(__func__);
  static const char *const grammars[] = {
      "root ::= ( [a-z]+ \" \" )* [0-9]{1,3} \"é\"?",
      "root ::= \"{\" ( pair ( \",\" pair )* )? \"}\"\npair ::= [a-c]+ \":\" ( root | [0-9]+ )",
      "root ::= [^\\x00-\\x1F\"]* \"\\\"\" [αβγ😀]*",
      /* a counted repetition nests a frame per character: the 4, 16 and
       * 64-frame cuts of the node entries */
      "root ::= \"<\" [a-d é]{0,90} \">\" ( \",\" root )?",
  };
  for (size_t i = 0; i < sizeof grammars / sizeof grammars[0]; i++) {
    brisk_grammar *g = compile(BRISK_CONSTRAINT_GBNF, grammars[i]);
    mask_property(g, &rng, grammars[i]);
    brisk_grammar_free(g);
  }
  brisk_grammar *g = compile(BRISK_CONSTRAINT_JSON, NULL);
  mask_property(g, &rng, "json");
  brisk_grammar_free(g);
  g = compile(BRISK_CONSTRAINT_JSON_SCHEMA,
              "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":-5,"
              "\"maximum\":120},\"s\":{\"type\":\"string\",\"maxLength\":4},\"e\":{\"enum\":[\"x\","
              "1,null]}},\"required\":[\"n\"]}");
  mask_property(g, &rng, "schema");
  brisk_grammar_free(g);
  assert_true(n_cut_total > 0); /* the cut-stack path was checked too */
}

/* The entries made ahead for reachable stacks (gr_masker_precompute) give
 * the masks of the run-time path bit for bit: three maskers over one
 * random vocabulary step through the same strings (cut at random bytes,
 * inside characters too): one made ahead with the default budget, one
 * with a budget that runs out after a few stacks, and one with only the
 * grammar positions made ahead (entries of deeper cuts on demand, as
 * before); each mask is also checked against the naive reference, every
 * token's bytes fed to the matcher. For a grammar without recursion the
 * default budget covers every stack: generation makes no entry. */
static void reach_case(const brisk_grammar *g, test_rng *rng, const char *name, int finite) {
  gen_ctx G;
  assert_int_equal(gen_init(&G, g, test_rng_u64(rng)), 0);
  tvocab tv;
  int32_t n_vocab = 1200, eog = n_vocab - 1;
  make_vocab(&tv, &G, rng, n_vocab);
  gr_masker k[3];
  gr_state s[3];
  for (int i = 0; i < 3; i++) {
    gr_vocab v;
    assert_int_equal(
        gr_vocab_build_texts(n_vocab, (const char *const *)tv.text, tv.len, &eog, 1, &v), BRISK_OK);
    assert_int_equal(gr_masker_init_vocab(&k[i], g, &v), BRISK_OK);
    if (i == 1) { /* runs out: a few stacks, about two walks of matching */
      k[i].pre_nodes = 6;
      k[i].pre_work = 2 * (uint64_t)k[i].v.n_tnodes;
    }
    if (i == 2) k[i].pre_nodes = 0; /* grammar positions only */
    assert_int_equal(gr_masker_precompute(&k[i]), BRISK_OK);
    assert_int_equal(gr_state_init(&k[i], &s[i]), BRISK_OK);
  }
  if (finite) assert_false(k[0].pre_capped);
  assert_true(k[1].pre_capped);
  assert_true(k[0].n_pre_nodes > k[1].n_pre_nodes);
  assert_true(k[0].n_entries_made > k[2].n_entries_made);
  uint64_t made0 = k[0].n_entries_made;
  gr_state probe;
  assert_int_equal(gr_state_init(&k[0], &probe), BRISK_OK);
  int n_states = 0;
  for (int round = 0; round < 16; round++) {
    size_t len;
    const char *str = gen_string(&G, 120, &len);
    char *copy = malloc(len + 1);
    memcpy(copy, str, len + 1);
    for (int i = 0; i < 3; i++) gr_state_reset(&k[i], &s[i]);
    for (size_t cut = 0;;) {
      const uint32_t *mask[3];
      int32_t n[3];
      for (int i = 0; i < 3; i++)
        assert_int_equal(gr_mask(&k[i], &s[i], &mask[i], &n[i]), BRISK_OK);
      for (int32_t t = 0; t < n_vocab; t++) {
        int want;
        if (t == eog) {
          want = gr_state_accepting(&s[0]);
        } else {
          assert_int_equal(gr_state_copy(&probe, &s[0]), BRISK_OK);
          want = gr_state_feed(&k[0], &probe, tv.text[t], tv.len[t]) == 1 && tv.len[t] > 0;
        }
        for (int i = 0; i < 3; i++)
          if (bit(mask[i], t) != want)
            fail_msg("%s: masker %d, token %d ('%.*s'): mask %d, reference %d, after '%.*s'", name,
                     i, t, (int)tv.len[t], tv.text[t], bit(mask[i], t), want, (int)cut, copy);
      }
      assert_int_equal(n[0], n[1]);
      assert_int_equal(n[0], n[2]);
      n_states++;
      if (cut == len) break;
      size_t step = 1 + test_rng_u64(rng) % 4;
      if (step > len - cut) step = len - cut;
      for (int i = 0; i < 3; i++)
        assert_int_equal(gr_state_feed(&k[i], &s[i], copy + cut, step), 1);
      cut += step;
    }
    free(copy);
  }
  assert_true(n_states > 40);
  /* Made ahead, the whole of a finite grammar: the states met made none
   * (the reference's probes share k[0]'s matcher, not its entries). */
  if (finite) assert_int_equal(k[0].n_entries_made, made0);
  assert_true(k[1].n_entries_made > 0);
  gr_state_release(&probe);
  for (int i = 0; i < 3; i++) {
    gr_state_release(&s[i]);
    gr_masker_release(&k[i]);
  }
  free_vocab(&tv);
  gen_release(&G);
}

static void test_precompute_reach(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded(__func__);
  brisk_grammar *g =
      compile(BRISK_CONSTRAINT_GBNF, "root ::= \"<\" [a-d é]{12,60} \">\" [0-9]{2,9}");
  reach_case(g, &rng, "counted repetition", 1);
  brisk_grammar_free(g);
  g = compile(BRISK_CONSTRAINT_JSON_SCHEMA,
              "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\","
              "\"maxLength\":24},\"where\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":"
              "\"array\",\"items\":{\"type\":\"string\",\"maxLength\":6},\"maxItems\":3}]},"
              "\"n\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}},\"required\":["
              "\"title\",\"n\"]}");
  reach_case(g, &rng, "schema with maxLength", 1);
  brisk_grammar_free(g);
  g = compile(BRISK_CONSTRAINT_JSON, NULL); /* recursive: covered up to the budget */
  reach_case(g, &rng, "json", 0);
  brisk_grammar_free(g);
}

/* gr_set_covers against the naive check (every code point of the range
 * in the set, one by one) on random ranges, for sets with touching,
 * nested and negated ranges. */
static void test_set_covers(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded(__func__);
  brisk_grammar *g =
      compile(BRISK_CONSTRAINT_GBNF,
              "root ::= [a-cd-fx] [^a-z\\u00e9] [\\u0080-\\u07ff\\u0800-\\u0fff\\u1000] "
              "[\\u0100-\\u0200\\u0150-\\u0300] [^\"\\\\\\x00-\\x1f]");
  int n_true = 0;
  for (size_t set = 0; set < g->n_sets; set++)
    for (int i = 0; i < 400; i++) {
      uint32_t lo = (uint32_t)(test_rng_u64(&rng) % 0x1100), hi = lo;
      if (i % 2) hi += (uint32_t)(test_rng_u64(&rng) % 0x900);
      int want = 1;
      for (uint32_t cp = lo; cp <= hi && want; cp++) want = gr_set_has(g, (uint32_t)set, cp);
      assert_int_equal(gr_set_covers(g, (uint32_t)set, lo, hi), want);
      n_true += want;
    }
  assert_true(n_true > 100);
  brisk_grammar_free(g);
}

/* States inside a character, keyed by their class (gr_utf8_class): for
 * every lead byte with the surrogate and overlong edges (E0, ED, F0, F4)
 * and each number of continuation bytes seen, the mask equals the naive
 * reference (every token's bytes fed to the matcher), in a grammar whose
 * strings take every character (the class path) and in one that leaves a
 * block of CJK out (the exact walk); in the first, prefixes of one class
 * share a cache entry. The vocabulary is every byte, continuation-byte
 * runs, with ASCII and quotes after them, and whole characters. */
static void test_partial_classes(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded(__func__);
  static const char *const grammars[] = {
      "root ::= \"\\\"\" [^\"\\\\]* \"\\\"\" [0-9]?",
      "root ::= \"\\\"\" [^\"\\\\\\u4e00-\\u4e0f]* \"\\\"\"",
  };
  static const uint8_t leads[] = {0xC2, 0xC3, 0xDF, 0xE0, 0xE1, 0xE4, 0xEC,
                                  0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4};
  int32_t n_vocab = 900, eog = n_vocab - 1;
  char **text = calloc((size_t)n_vocab, sizeof *text);
  uint32_t *len = calloc((size_t)n_vocab, sizeof *len);
  for (int32_t t = 0; t < n_vocab; t++) {
    uint8_t b[8];
    uint32_t l = 0;
    if (t < 256) {
      b[l++] = (uint8_t)t;
    } else if (t % 3) { /* continuation bytes, then maybe ASCII or a quote */
      for (uint32_t r = 1 + (uint32_t)(test_rng_u64(&rng) % 3); r > 0; r--)
        b[l++] = (uint8_t)(0x80 + test_rng_u64(&rng) % 64);
      if (test_rng_u64(&rng) % 2) b[l++] = "ab\"1"[test_rng_u64(&rng) % 4];
    } else { /* a whole character */
      uint32_t cp = 0x80 + (uint32_t)(test_rng_u64(&rng) % 0x10FF80);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x4E05;
      if (cp < 0x800) {
        b[l++] = (uint8_t)(0xC0 | cp >> 6);
      } else if (cp < 0x10000) {
        b[l++] = (uint8_t)(0xE0 | cp >> 12);
        b[l++] = (uint8_t)(0x80 | (cp >> 6 & 63));
      } else {
        b[l++] = (uint8_t)(0xF0 | cp >> 18);
        b[l++] = (uint8_t)(0x80 | (cp >> 12 & 63));
        b[l++] = (uint8_t)(0x80 | (cp >> 6 & 63));
      }
      b[l++] = (uint8_t)(0x80 | (cp & 63));
    }
    text[t] = malloc(l);
    memcpy(text[t], b, l);
    len[t] = l;
  }
  for (size_t gi = 0; gi < 2; gi++) {
    brisk_grammar *g = compile(BRISK_CONSTRAINT_GBNF, grammars[gi]);
    gr_vocab v;
    assert_int_equal(gr_vocab_build_texts(n_vocab, (const char *const *)text, len, &eog, 1, &v),
                     BRISK_OK);
    gr_masker k;
    assert_int_equal(gr_masker_init_vocab(&k, g, &v), BRISK_OK);
    assert_int_equal(gr_masker_precompute(&k), BRISK_OK);
    gr_state s, probe;
    assert_int_equal(gr_state_init(&k, &s), BRISK_OK);
    assert_int_equal(gr_state_init(&k, &probe), BRISK_OK);
    uint64_t hits0 = k.n_hits;
    for (size_t li = 0; li < sizeof leads; li++)
      for (int seen = 1; seen <= 3; seen++) {
        uint8_t pre[5] = {'"', 'x', leads[li]};
        int np = 3, need = leads[li] >= 0xF0 ? 4 : leads[li] >= 0xE0 ? 3 : 2;
        if (seen >= need) continue;
        for (int c = 1; c < seen; c++) { /* valid continuations, edges included */
          uint8_t lo = 0x80, hi = 0xBF;
          if (c == 1 && leads[li] == 0xE0) lo = 0xA0;
          if (c == 1 && leads[li] == 0xED) hi = 0x9F;
          if (c == 1 && leads[li] == 0xF0) lo = 0x90;
          if (c == 1 && leads[li] == 0xF4) hi = 0x8F;
          pre[np++] = (uint8_t)(lo + test_rng_u64(&rng) % (uint64_t)(hi - lo + 1));
        }
        gr_state_reset(&k, &s);
        assert_int_equal(gr_state_feed(&k, &s, (const char *)pre, (size_t)np), 1);
        const uint32_t *mask;
        int32_t n_allowed, count = 0;
        assert_int_equal(gr_mask(&k, &s, &mask, &n_allowed), BRISK_OK);
        for (int32_t t = 0; t < n_vocab; t++) {
          int want = 0;
          if (t != eog) {
            assert_int_equal(gr_state_copy(&probe, &s), BRISK_OK);
            want = gr_state_feed(&k, &probe, text[t], len[t]) == 1;
          }
          if (bit(mask, t) != want)
            fail_msg("grammar %zu, prefix %02X + %d: token %d (%u bytes, %02X..): mask %d, "
                     "reference %d",
                     gi, leads[li], seen - 1, t, len[t], (uint8_t)text[t][0], bit(mask, t), want);
          count += want;
        }
        assert_int_equal(count, n_allowed);
      }
    /* 14 lead bytes, 2-3 depths each, 10 classes: most were hits. */
    if (gi == 0) assert_true(k.n_hits - hits0 >= 10);
    gr_state_release(&s);
    gr_state_release(&probe);
    gr_masker_release(&k);
    brisk_grammar_free(g);
  }
  for (int32_t t = 0; t < n_vocab; t++) free(text[t]);
  free(text);
  free(len);
}

/* A real vocabulary (llama SPM, 32k tokens): generation by picking random
 * allowed tokens always reaches a whole JSON object, and the public API's
 * mask agrees with accept. */
static void test_spm_vocab(void **state) {
  (void)state;
  const char *path = test_shared_path("tokenizer/ggml-vocab-llama-spm.gguf");
  if (!path) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-spm.gguf is absent");
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.vocab_only = 1;
  brisk_model *m;
  assert_int_equal(brisk_model_load(path, &mp, &m), BRISK_OK);
  test_rng rng = test_rng_seeded(__func__);
  brisk_grammar *g = compile(BRISK_CONSTRAINT_JSON_SCHEMA,
                             "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
                             "\"maxLength\":12},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":"
                             "[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\",\"tags\"]}");
  brisk_constraint *c;
  assert_int_equal(brisk_constraint_create(m, g, &c), BRISK_OK);
  int32_t n_vocab = brisk_model_n_vocab(m);
  for (int run = 0; run < 5; run++) {
    brisk_constraint_reset(c);
    for (int step = 0;; step++) {
      assert_true(step < 400);
      const uint32_t *mask;
      int32_t n;
      assert_int_equal(brisk_constraint_mask(c, &mask, &n), BRISK_OK);
      assert_true(n > 0);
      int32_t pick = (int32_t)(test_rng_u64(&rng) % (uint64_t)n), t = 0;
      for (;; t++)
        if (bit(mask, t) && pick-- == 0) break;
      assert_true(t < n_vocab);
      if (brisk_token_is_eog(m, t)) {
        assert_true(brisk_constraint_is_complete(c));
        assert_int_equal(brisk_constraint_accept(c, t), BRISK_OK);
        break;
      }
      assert_int_equal(brisk_constraint_accept(c, t), BRISK_OK);
    }
    /* A token the mask forbids is refused. */
  }
  brisk_constraint_reset(c);
  const uint32_t *mask;
  assert_int_equal(brisk_constraint_mask(c, &mask, NULL), BRISK_OK);
  for (int32_t t = 0; t < n_vocab; t++)
    if (!bit(mask, t)) {
      assert_int_equal(brisk_constraint_accept(c, t), BRISK_E_INVALID_ARGUMENT);
      break;
    }
  brisk_constraint_free(c);
  brisk_grammar_free(g);
  brisk_model_free(m);
}

static brisk_status compile_op(void *ctx) {
  (void)ctx;
  brisk_constraint_params p;
  brisk_constraint_params_init(&p);
  p.kind = BRISK_CONSTRAINT_JSON_SCHEMA;
  p.text = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":"
           "\"integer\",\"maximum\":99}},\"b\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}}}";
  brisk_grammar *g;
  brisk_status st = brisk_grammar_compile(&p, &g);
  if (st) return st;
  gr_masker k;
  gr_vocab v;
  const char *texts[3] = {"[", "1", "\"a"};
  uint32_t len[3] = {1, 1, 2};
  int32_t eog = 0;
  if ((st = gr_vocab_build_texts(3, texts, len, &eog, 1, &v))) goto out;
  if ((st = gr_masker_init_vocab(&k, g, &v))) goto out;
  gr_state s;
  if (!(st = gr_state_init(&k, &s))) {
    const uint32_t *mask;
    int32_t n;
    st = gr_mask(&k, &s, &mask, &n);
    gr_state_release(&s);
  }
  gr_masker_release(&k);
out:
  brisk_grammar_free(g);
  return st;
}

static void test_oom(void **state) {
  (void)state;
  assert_true(test_every_allocation_fails(compile_op, NULL) > 10);
}

/* The sampler with a constraint: the distribution it draws from is the
 * softmax over the allowed tokens only (float64 reference), every draw is
 * allowed, a vocabulary mismatch is refused, and a constraint that allows
 * nothing makes sampling fail with BRISK_E_INVALID_STATE. */
static void test_sampler_mask(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded(__func__);
  const char *texts[] = {"a", "b", "ab", "ba", "c", "1", "12", "\"", "aa", ""};
  uint32_t len[10];
  for (int i = 0; i < 10; i++) len[i] = (uint32_t)strlen(texts[i]);
  int32_t eog = 9;
  brisk_grammar *g = compile(BRISK_CONSTRAINT_GBNF, "root ::= [ab]+ [0-9]?");
  gr_vocab v;
  assert_int_equal(gr_vocab_build_texts(10, texts, len, &eog, 1, &v), BRISK_OK);
  brisk_constraint c = {0};
  gr_masker k;
  assert_int_equal(gr_masker_init_vocab(&k, g, &v), BRISK_OK);
  c.k = &k;
  assert_int_equal(gr_state_init(&k, &c.s), BRISK_OK);
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = test_rng_u64(&rng);
  brisk_sampler *s, *other;
  assert_int_equal(brisk_sample_create(10, &sp, &s), BRISK_OK);
  assert_int_equal(brisk_sample_create(11, &sp, &other), BRISK_OK);
  assert_int_equal(brisk_sampler_set_constraint(other, &c), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_sampler_set_constraint(s, &c), BRISK_OK);
  float logits[10];
  double probs[10];
  for (int step = 0; step < 6; step++) {
    for (int t = 0; t < 10; t++) logits[t] = (float)test_rng_normal(&rng) * 3;
    const uint32_t *mask;
    int32_t n;
    assert_int_equal(gr_mask(&k, &c.s, &mask, &n), BRISK_OK);
    assert_int_equal(brisk_sample_distribution(s, logits, probs), BRISK_OK);
    double z = 0, ref[10];
    for (int t = 0; t < 10; t++) z += bit(mask, t) ? exp((double)logits[t]) : 0;
    for (int t = 0; t < 10; t++) {
      ref[t] = bit(mask, t) ? exp((double)logits[t]) / z : 0;
      assert_true(fabs(probs[t] - ref[t]) < 1e-9);
    }
    int32_t tok;
    assert_int_equal(brisk_sampler_sample_logits(s, logits, 10, &tok), BRISK_OK);
    assert_true(bit(mask, tok));
    if (tok == eog) break;
    assert_int_equal(gr_accept(&k, &c.s, tok), BRISK_OK);
  }
  /* After a digit only end of generation may follow; after it, nothing
   * but end of generation again. With the EOG token also banned by a
   * bias, every logit is -inf. */
  gr_state_reset(&k, &c.s);
  assert_int_equal(gr_accept(&k, &c.s, 0), BRISK_OK);
  assert_int_equal(gr_accept(&k, &c.s, 5), BRISK_OK);
  brisk_logit_bias ban = {eog, -INFINITY};
  sp.n_logit_bias = 1;
  sp.logit_bias = &ban;
  brisk_sampler *banned;
  assert_int_equal(brisk_sample_create(10, &sp, &banned), BRISK_OK);
  assert_int_equal(brisk_sampler_set_constraint(banned, &c), BRISK_OK);
  int32_t tok;
  assert_int_equal(brisk_sampler_sample_logits(banned, logits, 10, &tok), BRISK_E_INVALID_ARGUMENT);
  /* A grammar the vocabulary cannot continue: no token allowed. */
  gr_state_release(&c.s);
  gr_masker_release(&k);
  brisk_grammar_free(g);
  g = compile(BRISK_CONSTRAINT_GBNF, "root ::= \"z\"");
  assert_int_equal(gr_vocab_build_texts(10, texts, len, &eog, 1, &v), BRISK_OK);
  assert_int_equal(gr_masker_init_vocab(&k, g, &v), BRISK_OK);
  assert_int_equal(gr_state_init(&k, &c.s), BRISK_OK);
  assert_int_equal(brisk_sampler_sample_logits(s, logits, 10, &tok), BRISK_E_INVALID_STATE);
  brisk_sampler_free(s);
  brisk_sampler_free(other);
  brisk_sampler_free(banned);
  gr_state_release(&c.s);
  gr_masker_release(&k);
  brisk_grammar_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_grammars),  cmocka_unit_test(test_accept_reject),
      cmocka_unit_test(test_errors),          cmocka_unit_test(test_mask_property),
      cmocka_unit_test(test_spm_vocab),       cmocka_unit_test(test_oom),
      cmocka_unit_test(test_sampler_mask),    cmocka_unit_test(test_precompute_reach),
      cmocka_unit_test(test_partial_classes), cmocka_unit_test(test_set_covers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
