/* A model file changed under a running program. With use_mmap = 0 the
 * weights are read at load, so truncating or rewriting the file afterwards
 * (`cp new.gguf model.gguf` over a model in use) changes nothing: logits
 * stay bitwise the same. With the default mapping the hazard is real and
 * documented: a child process that truncates its mapped file dies of
 * SIGBUS at the next decode, even with repacked weights (the embedding and
 * the norms stay mapped). */
#include "test_models.h"

#include "core/dtype.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

enum { N_PROMPT = 6 };

/* Logits of the last of 6 tokens, into out[n_vocab]; the status of decode. */
static brisk_status logits(const brisk_model *m, float *out) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 64;
  cp.n_threads = 1;
  brisk_context *ctx = NULL;
  brisk_batch *b = NULL;
  brisk_status st = brisk_context_create(m, &cp, &ctx);
  if (!st) st = brisk_batch_create(N_PROMPT, &b);
  for (int32_t i = 0; !st && i < N_PROMPT; i++)
    st = brisk_batch_add(b, 4 + 7 * i, i, 0, i == N_PROMPT - 1);
  if (!st) st = brisk_decode(ctx, b);
  if (!st)
    memcpy(out, brisk_get_logits(ctx, N_PROMPT - 1), (size_t)brisk_model_n_vocab(m) * sizeof *out);
  brisk_batch_free(b);
  brisk_context_free(ctx);
  return st;
}

static void write_spec(const char *path, uint32_t weight_type, const char *seed) {
  test_model_spec s = test_model_default("llama");
  s.weight_type = weight_type;
  test_rng r = test_rng_seeded(seed);
  assert_int_equal(test_model_write(path, &s, &r, NULL), BRISK_OK);
}

static brisk_model *load(const char *path, int use_mmap, int repack) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.use_mmap = use_mmap;
  mp.repack = repack;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, &mp, &m);
  if (st) fail_msg("load: %s", brisk_last_error());
  return m;
}

/* use_mmap = 0: the file truncated, then rewritten with another model in
 * place, and then removed; every decode gives the logits of the first
 * load. */
static void test_read_at_load_survives(void **state) {
  (void)state;
  const uint32_t types[] = {BRISK_DTYPE_F32, BRISK_DTYPE_F16, BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q4_K};
  char path[128], other[128];
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  snprintf(other, sizeof other, "%s/other.gguf", dir);
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    for (int repack = 0; repack < 2; repack++) {
      write_spec(path, types[t], "read_at_load");
      write_spec(other, types[t], "read_at_load_other");
      brisk_model *m = load(path, 0, repack);
      int32_t nv = brisk_model_n_vocab(m);
      float *want = malloc((size_t)nv * sizeof *want), *got = malloc((size_t)nv * sizeof *got);
      assert_int_equal(logits(m, want), BRISK_OK);
      assert_int_equal(truncate(path, 0), 0);
      assert_int_equal(logits(m, got), BRISK_OK);
      assert_memory_equal(got, want, (size_t)nv * sizeof *got);
      /* `cp other.gguf model.gguf`: the same inode rewritten. */
      FILE *in = fopen(other, "rb"), *out = fopen(path, "r+b");
      assert_non_null(in);
      assert_non_null(out);
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
      fclose(in);
      fclose(out);
      assert_int_equal(logits(m, got), BRISK_OK);
      assert_memory_equal(got, want, (size_t)nv * sizeof *got);
      assert_int_equal(unlink(path), 0);
      assert_int_equal(logits(m, got), BRISK_OK);
      assert_memory_equal(got, want, (size_t)nv * sizeof *got);
      brisk_model_free(m);
      free(want);
      free(got);
    }
  }
}

/* The default mapping: the same truncation kills the process at the next
 * decode (run in a child), with repacking on or off. */
static void test_mapped_file_truncated_is_fatal(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/mapped.gguf", dir);
  for (int repack = 0; repack < 2; repack++) {
    write_spec(path, BRISK_DTYPE_Q8_0, "mapped_truncated");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      signal(SIGBUS, SIG_DFL); /* not cmocka's (or a sanitizer's) handler */
      brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
      brisk_model_params mp;
      brisk_model_params_init(&mp);
      mp.repack = repack;
      brisk_model *m = NULL;
      if (brisk_model_load(path, &mp, &m)) _exit(3);
      float *l = malloc((size_t)brisk_model_n_vocab(m) * sizeof *l);
      if (logits(m, l)) _exit(4);
      if (truncate(path, 0)) _exit(5);
      /* Reaches mapped pages past the end of the file now. */
      brisk_status st = logits(m, l);
      _exit(st ? 6 : 0);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGBUS)
      fail_msg("child %s %d, expected death by SIGBUS", WIFSIGNALED(ws) ? "died of" : "exited with",
               WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mapped_file_truncated_is_fatal),
      cmocka_unit_test(test_read_at_load_survives),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
