/* Quiet by default: a program that loads a model, decodes and frees
 * everything writes nothing to stdout or stderr, even where the library has
 * something to log, until the host asks for messages (and then it does, so
 * the capture below sees output when there is some). */
#include "test_models.h"

#include "core/dtype.h"
#include "core/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], path[128];

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  snprintf(path, sizeof path, "%s/m.gguf", dir);
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_Q8_0; /* regrouped where AVX2 runs: a DEBUG line */
  test_rng r = test_rng_seeded("quiet");
  return test_model_write(path, &s, &r, NULL) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

/* Runs the whole life of a model with stdout and stderr going to a file;
 * returns how many bytes were written there. */
static long captured_run(void) {
  char out[160];
  snprintf(out, sizeof out, "%s/out.txt", dir);
  fflush(stdout);
  fflush(stderr);
  int fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  assert_true(fd >= 0);
  int saved_out = dup(1), saved_err = dup(2);
  dup2(fd, 1);
  dup2(fd, 2);
  close(fd);

  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, NULL, &m);
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  if (!st) st = brisk_context_create(m, NULL, &c);
  if (!st) st = brisk_batch_create(4, &b);
  for (int i = 0; i < 4 && !st; i++) st = brisk_batch_add(b, 3 + i, i, 0, i == 3);
  if (!st) st = brisk_decode(c, b);
  /* Things that log: a warning and an error from inside the library. */
  BRISK_WARN("a warning nobody asked to see");
  brisk_log(BRISK_LOG_ERROR, "an error nobody asked to see");
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);

  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  assert_int_equal(st, BRISK_OK);
  FILE *f = fopen(out, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static void test_silent_by_default(void **state) {
  (void)state;
  assert_int_equal(captured_run(), 0);
}

static void test_speaks_when_asked(void **state) {
  (void)state;
  assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_DEBUG), BRISK_OK);
  long n = captured_run();
  assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE), BRISK_OK);
  assert_true(n > 0);
  /* Silenced again: nothing. */
  assert_int_equal(captured_run(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_silent_by_default),
      cmocka_unit_test(test_speaks_when_asked),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
