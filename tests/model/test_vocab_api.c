/* The public vocabulary calls on models loaded through brisk_model_load:
 * tokenize/detokenize round trips, the buffer protocol, streaming output,
 * special tokens and attributes, and models without a vocabulary. The
 * tokenizers themselves are conformance-tested in tests/tokenizer. */
#include "test_models.h"

#include "core/alloc.h"

#include <string.h>

static brisk_model *load_vocab(const char *rel) {
  const char *path = test_shared_path(rel);
  if (!path) return NULL;
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.vocab_only = 1;
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, &p, &m), BRISK_OK);
  return m;
}

static void test_spm_round_trip_and_buffers(void **state) {
  (void)state;
  brisk_model *m = load_vocab("tokenizer/ggml-vocab-llama-spm.gguf");
  if (!m) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-spm.gguf is absent");
  assert_string_equal(brisk_model_tokenizer(m), "spm");
  assert_int_equal(brisk_model_n_vocab(m), 32000);
  /* The published vector for "Hello world": 15043 3186, after BOS. */
  const char *text = "Hello world";
  size_t n = 0;
  assert_int_equal(brisk_tokenize(m, text, strlen(text), NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL, &n),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(n, 3);
  int32_t ids[8];
  assert_int_equal(brisk_tokenize(m, text, strlen(text), ids, 2, BRISK_TOKENIZE_ADD_SPECIAL, &n),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(brisk_tokenize(m, text, strlen(text), ids, 8, BRISK_TOKENIZE_ADD_SPECIAL, &n),
                   BRISK_OK);
  assert_int_equal(n, 3);
  assert_int_equal(ids[0], brisk_model_special_token(m, BRISK_TOKEN_BOS));
  assert_int_equal(ids[1], 15043);
  assert_int_equal(ids[2], 3186);
  char buf[64];
  size_t nb = 0;
  assert_int_equal(brisk_detokenize(m, ids, n, BRISK_DETOKENIZE_REMOVE_SPECIAL, buf, sizeof buf, &nb),
                   BRISK_OK);
  assert_int_equal(nb, strlen(text));
  assert_memory_equal(buf, text, nb);
  assert_int_equal(brisk_detokenize(m, ids, n, BRISK_DETOKENIZE_REMOVE_SPECIAL, buf, 3, &nb),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(nb, strlen(text));
  assert_int_equal(brisk_token_to_piece(m, 15043, 0, buf, sizeof buf, &nb), BRISK_OK);
  assert_int_equal(nb, 6);
  assert_memory_equal(buf, " Hello", 6);
  assert_int_equal(brisk_token_to_piece(m, 32000, 0, buf, sizeof buf, &nb), BRISK_E_INVALID_ARGUMENT);
  /* BOS renders only when asked. */
  assert_int_equal(brisk_token_to_piece(m, ids[0], 0, buf, sizeof buf, &nb), BRISK_OK);
  assert_int_equal(nb, 0);
  assert_true(brisk_token_attr(m, ids[0]) & BRISK_TOKEN_ATTR_CONTROL);
  assert_true(brisk_token_attr(m, 15043) & BRISK_TOKEN_ATTR_NORMAL);
  assert_int_equal(brisk_token_attr(m, -1), 0);
  assert_true(brisk_token_is_eog(m, brisk_model_special_token(m, BRISK_TOKEN_EOS)));
  assert_false(brisk_token_is_eog(m, 15043));
  /* Bad arguments. */
  assert_int_equal(brisk_tokenize(m, NULL, 3, ids, 8, 0, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_tokenize(m, text, 3, ids, 8, 64, &n), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_tokenize(m, NULL, 0, NULL, 0, 0, &n), BRISK_OK);
  assert_int_equal(n, 0);
  brisk_model_free(m);
}

/* Token by token, the streaming detokenizer releases only whole UTF-8
 * characters, and the concatenation equals the one-shot text. */
static void test_streaming(void **state) {
  (void)state;
  brisk_model *m = load_vocab("tokenizer/ggml-vocab-qwen2.gguf");
  if (!m) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-qwen2.gguf is absent");
  assert_string_equal(brisk_model_tokenizer(m), "bpe");
  const char *text = "héllo 世界! 🙂 <|im_start|>x";
  int32_t ids[64];
  size_t n = 0;
  assert_int_equal(brisk_tokenize(m, text, strlen(text), ids, 64, BRISK_TOKENIZE_PARSE_SPECIAL, &n),
                   BRISK_OK);
  brisk_detokenizer *d = NULL;
  assert_int_equal(brisk_detokenizer_create(m, BRISK_DETOKENIZE_RENDER_SPECIAL, &d), BRISK_OK);
  char out[256];
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    const char *t;
    size_t len;
    assert_int_equal(brisk_detokenizer_push(d, ids[i], &t, &len), BRISK_OK);
    /* Every release is whole characters: it never ends inside one. */
    if (len) {
      unsigned char last_lead = 0;
      size_t k = len;
      while (k > 0 && ((unsigned char)t[k - 1] & 0xC0) == 0x80) k--;
      if (k > 0) last_lead = (unsigned char)t[k - 1];
      size_t want = last_lead < 0x80 ? 1 : last_lead >= 0xF0 ? 4 : last_lead >= 0xE0 ? 3 : 2;
      assert_int_equal(len - (k - 1), want);
    }
    memcpy(out + used, t, len);
    used += len;
  }
  const char *t;
  size_t len;
  assert_int_equal(brisk_detokenizer_flush(d, &t, &len), BRISK_OK);
  memcpy(out + used, t, len);
  used += len;
  assert_int_equal(used, strlen(text));
  assert_memory_equal(out, text, used);
  const char *dummy;
  assert_int_equal(brisk_detokenizer_push(d, -5, &dummy, &len), BRISK_E_INVALID_ARGUMENT);
  brisk_detokenizer_free(d);
  brisk_detokenizer_free(NULL);
  brisk_model_free(m);
}

static void test_model_without_vocab(void **state) {
  (void)state;
  const char *dir = test_tmpdir();
  char path[256];
  snprintf(path, sizeof path, "%s/novocab.gguf", dir);
  test_model_spec s = test_model_default("llama");
  test_rng r = test_rng_seeded("novocab");
  /* Without tokenizer keys the model loads, and the vocabulary calls
   * explain why they cannot work. */
  s.no_vocab = true;
  assert_int_equal(test_model_write(path, &s, &r, NULL), BRISK_OK);
  brisk_model *m = NULL;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  size_t n;
  assert_int_equal(brisk_tokenize(m, "a", 1, NULL, 0, 0, &n), BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "vocabulary"));
  assert_string_equal(brisk_model_tokenizer(m), "");
  assert_int_equal(brisk_model_special_token(m, BRISK_TOKEN_BOS), -1);
  brisk_model_free(m);
  /* The small vocabulary the test models carry tokenizes. */
  s.no_vocab = false;
  assert_int_equal(test_model_write(path, &s, &r, NULL), BRISK_OK);
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  int32_t ids[16];
  assert_int_equal(brisk_tokenize(m, "ab c", 4, ids, 16, BRISK_TOKENIZE_ADD_SPECIAL, &n), BRISK_OK);
  assert_true(n >= 3);
  assert_int_equal(ids[0], 1);
  char buf[16];
  size_t nb;
  assert_int_equal(brisk_detokenize(m, ids, n, BRISK_DETOKENIZE_REMOVE_SPECIAL, buf, sizeof buf, &nb),
                   BRISK_OK);
  assert_int_equal(nb, 4);
  assert_memory_equal(buf, "ab c", 4);
  brisk_model_free(m);
  test_tmpdir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spm_round_trip_and_buffers),
      cmocka_unit_test(test_streaming),
      cmocka_unit_test(test_model_without_vocab),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
