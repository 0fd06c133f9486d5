/* Stop conditions: stop strings split across tokens are caught and never
 * shown, held-back text is released when it turns out not to be a stop
 * string, EOG / stop tokens / max tokens end the generation, and the
 * concatenated text equals the detokenized text up to the stop. */
#include "test_support.h"

#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

static brisk_model *vocab;

static int setup(void **state) {
  (void)state;
  const char *path = test_shared_path("tokenizer/ggml-vocab-llama-spm.gguf");
  if (!path) return 0;
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.vocab_only = 1;
  return brisk_model_load(path, &p, &vocab) == BRISK_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  brisk_model_free(vocab);
  return 0;
}

/* Pushes the tokens of `text` (no BOS) then `extra`; returns the shown text
 * (malloc'ed), the reason and how many tokens were pushed before stopping. */
static char *run(brisk_stopper *s, const char *text, int32_t extra, brisk_stop_reason *reason,
                 int *pushed) {
  int32_t toks[128];
  size_t n = 0;
  assert_int_equal(brisk_tokenize(vocab, text, strlen(text), toks, 127, 0, &n), BRISK_OK);
  if (extra >= 0) toks[n++] = extra;
  char *shown = calloc(1, 1024);
  size_t used = 0;
  *reason = BRISK_STOP_NONE;
  *pushed = 0;
  for (size_t i = 0; i < n && *reason == BRISK_STOP_NONE; i++) {
    const char *t;
    size_t len;
    assert_int_equal(brisk_stopper_push(s, toks[i], &t, &len, reason), BRISK_OK);
    memcpy(shown + used, t, len);
    used += len;
    (*pushed)++;
  }
  if (*reason == BRISK_STOP_NONE) {
    const char *t;
    size_t len;
    assert_int_equal(brisk_stopper_flush(s, &t, &len), BRISK_OK);
    memcpy(shown + used, t, len);
    used += len;
  }
  shown[used] = 0;
  return shown;
}

static brisk_stopper *make(const char *const *strs, size_t n_strs, const int32_t *toks,
                           size_t n_toks, int32_t max_tokens) {
  brisk_stopper_params p;
  brisk_stopper_params_init(&p);
  p.stop_strings = strs;
  p.n_stop_strings = n_strs;
  p.stop_tokens = toks;
  p.n_stop_tokens = n_toks;
  p.max_tokens = max_tokens;
  brisk_stopper *s = NULL;
  assert_int_equal(brisk_stopper_create(vocab, &p, &s), BRISK_OK);
  return s;
}

static void test_stop_strings(void **state) {
  (void)state;
  if (!vocab) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-spm.gguf is absent");
  const char *text = "Hello world, this is a test of stopping";
  brisk_stop_reason why;
  int pushed;
  /* No stop strings: the shown text is the detokenized text. */
  brisk_stopper *s = make(NULL, 0, NULL, 0, 0);
  char *shown = run(s, text, -1, &why, &pushed);
  assert_string_equal(shown, text);
  assert_int_equal(why, BRISK_STOP_NONE);
  free(shown);
  brisk_stopper_free(s);
  /* Stop strings spanning token boundaries, and the earliest one wins. */
  const char *cases[][2] = {{"is a", "Hello world, this "},
                            {"ld, th", "Hello wor"},
                            {"test", "Hello world, this is a "},
                            {"s", "Hello world, thi"}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const char *strs[2] = {"never matches", cases[c][0]};
    s = make(strs, 2, NULL, 0, 0);
    shown = run(s, text, -1, &why, &pushed);
    assert_int_equal(why, BRISK_STOP_STRING);
    assert_string_equal(shown, cases[c][1]);
    free(shown);
    /* After a stop, pushing is refused until reset; reset starts over. */
    const char *t;
    size_t len;
    assert_int_equal(brisk_stopper_push(s, 100, &t, &len, &why), BRISK_E_INVALID_STATE);
    brisk_stopper_reset(s);
    shown = run(s, text, -1, &why, &pushed);
    assert_string_equal(shown, cases[c][1]);
    free(shown);
    brisk_stopper_free(s);
  }
  /* A held-back prefix that never completes is shown in the end. */
  const char *strs[1] = {"ping now"};
  s = make(strs, 1, NULL, 0, 0);
  shown = run(s, text, -1, &why, &pushed);
  assert_int_equal(why, BRISK_STOP_NONE);
  assert_string_equal(shown, text);
  free(shown);
  brisk_stopper_free(s);
}

static void test_tokens_and_limits(void **state) {
  (void)state;
  if (!vocab) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-spm.gguf is absent");
  brisk_stop_reason why;
  int pushed;
  int32_t eos = brisk_model_special_token(vocab, BRISK_TOKEN_EOS);
  /* EOG: held-back text is released, the EOG token shows nothing. */
  const char *strs[1] = {"one two three"};
  brisk_stopper *s = make(strs, 1, NULL, 0, 0);
  char *shown = run(s, "count one two", eos, &why, &pushed);
  assert_int_equal(why, BRISK_STOP_EOG);
  assert_string_equal(shown, "count one two");
  free(shown);
  brisk_stopper_free(s);
  /* An extra stop token. */
  int32_t stop_tok[1] = {3186}; /* " world" */
  s = make(NULL, 0, stop_tok, 1, 0);
  shown = run(s, "Hello world again", -1, &why, &pushed);
  assert_int_equal(why, BRISK_STOP_TOKEN);
  assert_string_equal(shown, "Hello");
  assert_int_equal(pushed, 2);
  free(shown);
  brisk_stopper_free(s);
  /* max_tokens: the last token's text counts. */
  s = make(NULL, 0, NULL, 0, 3);
  shown = run(s, "Hello world, this is", -1, &why, &pushed);
  assert_int_equal(why, BRISK_STOP_MAX_TOKENS);
  assert_int_equal(pushed, 3);
  assert_string_equal(shown, "Hello world,");
  free(shown);
  brisk_stopper_free(s);
}

static void test_validation(void **state) {
  (void)state;
  if (!vocab) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-spm.gguf is absent");
  brisk_stopper_params p;
  brisk_stopper_params_init(&p);
  brisk_stopper *s = NULL;
  p.max_tokens = -1;
  assert_int_equal(brisk_stopper_create(vocab, &p, &s), BRISK_E_INVALID_ARGUMENT);
  brisk_stopper_params_init(&p);
  const char *empty[1] = {""};
  p.stop_strings = empty;
  p.n_stop_strings = 1;
  assert_int_equal(brisk_stopper_create(vocab, &p, &s), BRISK_E_INVALID_ARGUMENT);
  brisk_stopper_params_init(&p);
  int32_t bad[1] = {32000};
  p.stop_tokens = bad;
  p.n_stop_tokens = 1;
  assert_int_equal(brisk_stopper_create(vocab, &p, &s), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "32000"));
  assert_null(s);
  assert_int_equal(brisk_stopper_create(NULL, NULL, &s), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_stopper_create(vocab, NULL, &s), BRISK_OK);
  const char *t;
  size_t len;
  brisk_stop_reason why;
  assert_int_equal(brisk_stopper_push(s, -1, &t, &len, &why), BRISK_E_INVALID_ARGUMENT);
  brisk_stopper_free(s);
  brisk_stopper_free(NULL);
}

static brisk_status create_push_free(void *ctx) {
  (void)ctx;
  const char *strs[2] = {"abc", "is a"};
  brisk_stopper_params p;
  brisk_stopper_params_init(&p);
  p.stop_strings = strs;
  p.n_stop_strings = 2;
  brisk_stopper *s = NULL;
  brisk_status st = brisk_stopper_create(vocab, &p, &s);
  if (st) return st;
  const int32_t toks[3] = {15043, 3186, 338};
  for (int i = 0; i < 3 && !st; i++) {
    const char *t;
    size_t len;
    brisk_stop_reason why;
    st = brisk_stopper_push(s, toks[i], &t, &len, &why);
  }
  brisk_stopper_free(s);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  if (!vocab) SKIP_BECAUSE("../shared/tokenizer/ggml-vocab-llama-spm.gguf is absent");
  assert_true(test_every_allocation_fails(create_push_free, NULL) > 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stop_strings),
      cmocka_unit_test(test_tokens_and_limits),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
