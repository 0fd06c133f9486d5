/* Conformance with llama.cpp's published vocabulary test vectors in
 * ../shared/tokenizer (each .inp text is followed by
 * "\n__ggml_vocab_test__\n"; the .out file has one line of ids per text),
 * lossless round trips, streaming, special tokens on real vocabularies, and
 * GGUF metadata errors. */
#include "tok_test_util.h"

#include "core/alloc.h"
#include "format/gguf.h"

#include <stdio.h>

static const char *const k_vocabs[] = {"llama-spm",    "llama-bpe", "gpt-2",  "falcon",
                                       "deepseek-llm", "mpt",       "refact", "qwen2"};

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = '\0';
  fclose(f);
  *n = (size_t)len;
  return buf;
}

static brisk_vocab *load_shared(const char *name) {
  char rel[128];
  snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf", name);
  const char *path = test_shared_path(rel);
  if (!path) return NULL;
  brisk_vocab *v = NULL;
  brisk_status st = brisk_vocab_from_gguf_file(path, &v);
  if (st != BRISK_OK) fprintf(stderr, "%s: %s\n", name, brisk_last_error());
  assert_int_equal(st, BRISK_OK);
  return v;
}

static void test_published_vectors(void **state) {
  (void)state;
  if (!test_shared_path("tokenizer/ggml-vocab-llama-spm.gguf"))
    SKIP_BECAUSE("../shared/tokenizer (vocabulary test vectors) is absent");
  static const char sep[] = "\n__ggml_vocab_test__\n";
  size_t total = 0;
  for (size_t k = 0; k < sizeof k_vocabs / sizeof k_vocabs[0]; k++) {
    brisk_vocab *v = load_shared(k_vocabs[k]);
    assert_non_null(v);
    char rel[128], path[4096];
    snprintf(rel, sizeof rel, "tokenizer/ggml-vocab-%s.gguf", k_vocabs[k]);
    size_t n_inp, n_out;
    snprintf(path, sizeof path, "%s.inp", test_shared_path(rel));
    char *inp = slurp(path, &n_inp);
    snprintf(path, sizeof path, "%s.out", test_shared_path(rel));
    char *out = slurp(path, &n_out);
    char *line = out, *pos = inp;
    size_t count = 0;
    while (pos < inp + n_inp) {
      char *end = strstr(pos, sep);
      assert_non_null(end); /* every text is terminated by the separator */
      size_t len = (size_t)(end - pos);
      char *eol = strchr(line, '\n');
      assert_non_null(eol);
      *eol = '\0';
      int32_t want[512];
      size_t nw = 0;
      for (char *p = line; *p;) {
        char *q;
        long id = strtol(p, &q, 10);
        if (q == p) break;
        want[nw++] = (int32_t)id;
        p = q;
      }
      size_t n, dn;
      int32_t *got = tok_all(v, pos, len, false, false, &n);
      if (n != nw || memcmp(got, want, n * sizeof *got) != 0) {
        fprintf(stderr, "%s: text %zu ('%.*s') tokenizes differently\n", k_vocabs[k], count,
                (int)(len > 60 ? 60 : len), pos);
        fail();
      }
      /* Every one of these vocabularies is lossless on these texts. */
      char *back = detok_all(v, got, n, 0, &dn);
      assert_int_equal(dn, len);
      assert_memory_equal(back, pos, len);
      /* And so is the stream, piece by piece. */
      brisk_detok_stream *s = NULL;
      assert_int_equal(brisk_detok_stream_create(v, 0, &s), BRISK_OK);
      size_t sl = 0;
      for (size_t i = 0; i <= n; i++) {
        const char *t;
        size_t tl;
        if (i < n)
          assert_int_equal(brisk_detok_stream_push(s, got[i], &t, &tl), BRISK_OK);
        else
          assert_int_equal(brisk_detok_stream_flush(s, &t, &tl), BRISK_OK);
        assert_true(sl + tl <= len);
        assert_memory_equal(t, pos + sl, tl);
        sl += tl;
      }
      assert_int_equal(sl, len);
      brisk_detok_stream_free(s);
      free(back);
      free(got);
      line = eol + 1;
      pos = end + sizeof sep - 1;
      count++;
    }
    assert_int_equal(count, 46);
    total += count;
    free(inp);
    free(out);
    brisk_vocab_free(v);
  }
  assert_int_equal(total, 46 * 8);
}

static void test_special_tokens_real(void **state) {
  (void)state;
  brisk_vocab *v = load_shared("llama-bpe");
  if (!v) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-bpe.gguf is absent");
  const char text[] = "<|begin_of_text|>Hello<|eot_id|>";
  size_t n, dn;
  int32_t *t = tok_all(v, text, strlen(text), false, true, &n);
  assert_int_equal(n, 3);
  assert_int_equal(t[0], 128000);
  assert_int_equal(t[2], 128009);
  assert_true(brisk_vocab_is_eog(v, 128009));
  assert_true(brisk_vocab_is_eog(v, 128001));
  assert_false(brisk_vocab_is_eog(v, t[1]));
  char *back = detok_all(v, t, n, BRISK_DETOK_RENDER_SPECIAL, &dn);
  assert_int_equal(dn, strlen(text));
  assert_memory_equal(back, text, dn);
  free(back), free(t);
  /* Not parsed: the control text is ordinary text. */
  t = tok_all(v, text, strlen(text), false, false, &n);
  for (size_t i = 0; i < n; i++) assert_true(t[i] < 128000);
  free(t);
  /* llama3 adds BOS. */
  assert_true(brisk_vocab_adds_bos(v));
  t = tok_all(v, "Hi", 2, true, false, &n);
  assert_int_equal(t[0], 128000);
  free(t);
  brisk_vocab_free(v);

  v = load_shared("llama-spm");
  assert_non_null(v);
  t = tok_all(v, "Hello", 5, true, false, &n);
  assert_int_equal(n, 2);
  assert_int_equal(t[0], 1);
  assert_int_equal(t[1], 15043); /* "▁Hello" */
  back = detok_all(v, t, n, BRISK_DETOK_REMOVE_SPECIAL, &dn);
  assert_int_equal(dn, 5);
  assert_memory_equal(back, "Hello", 5);
  free(back), free(t);
  assert_int_equal(brisk_vocab_get_type(v), BRISK_VOCAB_SPM);
  assert_int_equal(brisk_vocab_special_id(v, BRISK_VOCAB_EOS), 2);
  brisk_vocab_free(v);
}

/* GGUF metadata in memory through the writer. */
typedef struct kv_spec {
  const char *model;    /* NULL: no tokenizer.ggml.model */
  const char *pre;      /* NULL: none */
  bool tokens_as_u32;   /* write tokens with the wrong type */
  uint64_t n_scores;    /* scores array length (0: none) */
  int add_space_prefix; /* -1: absent */
} kv_spec;

static brisk_status load_spec(const kv_spec *k, brisk_vocab **v) {
  brisk_gguf_writer *w = NULL;
  assert_int_equal(brisk_gguf_writer_create(3, 32, &w), BRISK_OK);
  const char *toks[] = {"<unk>",
                        "<s>",
                        "</s>",
                        "\xE2\x96\x81",
                        "a",
                        "\xE2\x96\x81"
                        "a",
                        "b"};
  int32_t types[] = {2, 3, 3, 1, 1, 1, 1};
  float scores[16] = {0, 0, 0, -1, -2, -0.5f, -3};
  if (k->model)
    assert_int_equal(brisk_gguf_writer_set_str(w, "tokenizer.ggml.model", k->model), BRISK_OK);
  if (k->pre)
    assert_int_equal(brisk_gguf_writer_set_str(w, "tokenizer.ggml.pre", k->pre), BRISK_OK);
  if (k->tokens_as_u32) {
    uint32_t bogus[7] = {0};
    assert_int_equal(
        brisk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", BRISK_GGUF_UINT32, bogus, 7),
        BRISK_OK);
  } else {
    assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 7), BRISK_OK);
  }
  assert_int_equal(
      brisk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", BRISK_GGUF_INT32, types, 7),
      BRISK_OK);
  if (k->n_scores)
    assert_int_equal(brisk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", BRISK_GGUF_FLOAT32,
                                               scores, k->n_scores),
                     BRISK_OK);
  const char *merges[] = {"a b"};
  assert_int_equal(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1), BRISK_OK);
  if (k->add_space_prefix >= 0)
    assert_int_equal(
        brisk_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", k->add_space_prefix),
        BRISK_OK);
  void *data = NULL;
  size_t size = 0;
  assert_int_equal(brisk_gguf_writer_write_memory(w, &data, &size), BRISK_OK);
  brisk_gguf_writer_free(w);
  brisk_gguf *g = NULL;
  assert_int_equal(brisk_gguf_open_memory(data, size, &g), BRISK_OK);
  brisk_status st = brisk_vocab_from_gguf(g, v);
  brisk_gguf_close(g);
  brisk_free(data);
  return st;
}

static void expect_gguf_error(const kv_spec *k, brisk_status want, const char *needle) {
  brisk_vocab *v = NULL;
  assert_int_equal(load_spec(k, &v), want);
  assert_null(v);
  if (!strstr(brisk_last_error(), needle)) {
    fprintf(stderr, "message '%s' lacks '%s'\n", brisk_last_error(), needle);
    fail();
  }
}

static void test_gguf_metadata(void **state) {
  (void)state;
  kv_spec ok = {"llama", NULL, false, 7, -1};
  brisk_vocab *v = NULL;
  assert_int_equal(load_spec(&ok, &v), BRISK_OK);
  size_t n;
  int32_t *t = tok_all(v, "a a", 3, false, false, &n);
  assert_int_equal(n, 2);
  assert_int_equal(t[0], 5), assert_int_equal(t[1], 5); /* ▁a ▁a */
  free(t);
  brisk_vocab_free(v);
  kv_spec no_prefix = {"llama", NULL, false, 7, 0};
  assert_int_equal(load_spec(&no_prefix, &v), BRISK_OK);
  t = tok_all(v, "a a", 3, false, false, &n);
  assert_int_equal(n, 2);
  assert_int_equal(t[0], 4), assert_int_equal(t[1], 5); /* a ▁a */
  free(t);
  brisk_vocab_free(v);
  kv_spec bpe = {"gpt2", "gpt-2", false, 0, -1};
  assert_int_equal(load_spec(&bpe, &v), BRISK_OK);
  brisk_vocab_free(v);

  kv_spec bert = {"bert", NULL, false, 0, -1};
  expect_gguf_error(&bert, BRISK_E_UNSUPPORTED, "'bert'");
  /* An unknown pre-tokenizer name loads with the 'default' regexes (and a
   * warning; test_pretok_names checks it and the splits). */
  kv_spec bad_pre = {"gpt2", "not-a-pre", false, 0, -1};
  assert_int_equal(load_spec(&bad_pre, &v), BRISK_OK);
  assert_string_equal(brisk_vocab_pre_name(v), "not-a-pre");
  brisk_vocab_free(v);
  kv_spec no_model = {NULL, NULL, false, 0, -1};
  expect_gguf_error(&no_model, BRISK_E_FORMAT, "tokenizer.ggml.model");
  kv_spec bad_tokens = {"llama", NULL, true, 0, -1};
  expect_gguf_error(&bad_tokens, BRISK_E_FORMAT, "tokenizer.ggml.tokens");
  kv_spec short_scores = {"llama", NULL, false, 3, -1};
  expect_gguf_error(&short_scores, BRISK_E_FORMAT, "tokenizer.ggml.scores");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_published_vectors),
      cmocka_unit_test(test_special_tokens_real),
      cmocka_unit_test(test_gguf_metadata),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
